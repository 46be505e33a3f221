"""Confirmation of critical effects: what counts as a yes, and whose yes counts.

Which calls need a yes is not decided here, nor from the model's arguments: Home
Assistant's side holds every critical *effect* (a service call that would unlock, open,
disarm, or touch an entity the user marked) at the moment it is about to happen, while a
tool runs (tools/effects.py). This module is the agent's half of that contract:

- `EffectGuard`, the interface the graph sees: after a round of tool calls it takes the
  effects that were held, and after the requester's answer it releases (runs) or drops them.
- `current_tool_call`, which tool call is running, so a held effect is attributed to it.
- `Requester` and `decide`, binding a pending yes to who asked, where, and until when.
- `is_affirmative`, a whole reply that clearly says yes, in every language we ship.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
import re
from typing import Any, Protocol
import unicodedata

INTERRUPT_KIND = "confirm"

# Seconds a critical action waits for its yes before it is dropped.
CONFIRMATION_TIMEOUT = 120.0

# The tool call running in this task (and the tasks it starts): set around each call by
# tool_calls.run_tool_calls, read by the effect gate to say which call an effect belongs to.
current_tool_call: ContextVar[str | None] = ContextVar(
    "langgraph_conversation_tool_call", default=None
)


@dataclass(frozen=True, slots=True)
class HeldEffects:
    """Effects held during one round of tool calls, waiting for a yes.

    `token` names them for `EffectGuard.release`; `by_call` says, per tool call id, what
    each would do ("unlock Front Door"), in the order they were held.
    """

    token: str
    by_call: dict[str, tuple[str, ...]]

    @property
    def actions(self) -> tuple[str, ...]:
        """Each distinct action once, in the order first held: what the question names."""
        seen: dict[str, None] = {}
        for actions in self.by_call.values():
            for action in actions:
                seen.setdefault(action, None)
        return tuple(seen)


@dataclass(frozen=True, slots=True)
class Released:
    """What became of one tool call's held effects after the answer."""

    done: tuple[str, ...] = ()
    # Action → why it failed (Home Assistant's error), for actions that ran and failed.
    failed: dict[str, str] | None = None


class EffectGuard(Protocol):
    """Home Assistant's effect gate as one turn sees it (see tools/effects.py)."""

    def take_held(self) -> HeldEffects | None:
        """The effects held since the last call, now waiting for an answer (None: none)."""

    async def release(self, token: str, *, confirmed: bool) -> dict[str, Released] | None:
        """Run (confirmed) or drop the held effects of `token`; per tool call id what ran.

        None when nothing is held under `token` any more (expired, or Home Assistant
        restarted since): nothing runs.
        """


@dataclass(frozen=True, slots=True)
class Requester:
    """Who asked for a turn, from where, in which conversation. A yes must come from the
    same three: another person, another satellite or another conversation cannot confirm
    what this one asked."""

    user_id: str | None = None
    device_id: str | None = None
    conversation_id: str | None = None

    def as_dict(self) -> dict[str, str | None]:
        """Plain values, for the checkpointed pause."""
        return {
            "user_id": self.user_id,
            "device_id": self.device_id,
            "conversation_id": self.conversation_id,
        }

    @property
    def present(self) -> bool:
        """A person is there to answer: a signed-in user or a satellite someone speaks to."""
        return bool(self.user_id or self.device_id)


@dataclass(frozen=True, slots=True)
class Decision:
    """How a pending confirmation ends with this turn's message."""

    confirmed: bool
    # Why it was not confirmed: "declined", "other_requester", "expired".
    reason: str = ""


def pause_value(
    held: HeldEffects, requester: Requester, now: float, timeout: float = CONFIRMATION_TIMEOUT
) -> dict[str, Any]:
    """The checkpointed pause: the question's actions, bound to the requester, expiring."""
    return {
        "kind": INTERRUPT_KIND,
        "actions": list(held.actions),
        "token": held.token,
        "calls": {call_id: list(actions) for call_id, actions in held.by_call.items()},
        "requester": requester.as_dict(),
        "expires_at": now + timeout,
    }


def decide(pause: dict[str, Any], requester: Requester, reply: str, now: float) -> Decision:
    """Whether this message from `requester` confirms the pause.

    Only a clear yes, from the same user, device and conversation, before it expired.
    """
    asked_by = pause.get("requester")
    if not isinstance(asked_by, dict) or asked_by != requester.as_dict():
        return Decision(False, "other_requester")
    expires_at = pause.get("expires_at")
    if not isinstance(expires_at, int | float) or now > expires_at:
        return Decision(False, "expired")
    if not is_affirmative(reply):
        return Decision(False, "declined")
    return Decision(True)


# Whole replies that confirm, in every language the integration ships (en, de, fr, es, it,
# nl, pl, pt, pt-BR, sv, da, nb, fi, cs, ru, uk, zh-Hans), one language after another. A
# reply must be one of these as a whole (after case, accents-preserving normalisation and
# punctuation): "yes, but wait" or "OK, what's the weather?" is something else, and
# anything else cancels. A missed yes costs a repeat; a misread one would open a door, so
# nothing that could mean "no", "wait" or "maybe" in any of them is listed (the Russian
# filler "так", Ukrainian for yes, is the one word shared with another meaning, and only
# as a whole reply).
_YES_PHRASES = """
yes | yes please | yes do it | yes go ahead | yes please do | yes do | yes i do | yes i am sure
yeah | yep | yup | sure | sure go ahead | ok | okay | ok do it | okay do it | ok go ahead
confirm | confirmed | i confirm | do it | go ahead | please do | please do it | of course
affirmative | absolutely | correct | that's right | yes that's right
ja | ja bitte | jawohl | ja mach das | ja mach | mach das | mach es | ja genau | genau
ja gerne | ja klar | klar | bestätigt | bestätige | ich bestätige | los
oui | oui s'il te plaît | oui s'il vous plaît | oui vas-y | vas-y | allez-y | d'accord
oui d'accord | bien sûr | oui bien sûr | je confirme | confirmé | ouais | oui merci
sí | si | sí por favor | si por favor | claro | claro que sí | de acuerdo | vale | sí hazlo
hazlo | adelante | confirmo | confirmado | por supuesto
ja graag | jazeker | jawel | doe maar | doe het | ja doe maar | ja doe het | prima | akkoord
ik bevestig | bevestigd | zeker
sì | sì grazie | si grazie | certo | certamente | va bene | sì fallo | fallo | procedi
confermo | confermato | d'accordo
tak | tak proszę | tak poproszę | oczywiście | dobrze | zgoda | potwierdzam | zrób to
tak zrób to | jasne
sim | sim por favor | claro que sim | pode | pode sim | confirmo | confirmado | com certeza
faça isso | faz isso | sim faça isso
ja tack | ja gärna | javisst | absolut | gör det | ja gör det | bekräftar | bekräftat | visst
ja tak | ja gerne | gør det | ja gør det | bekræft | bekræftet | selvfølgelig | helt sikkert
ja bitte mach das | ja los | klar mach | auf jeden fall | natürlich | na klar | ok mach das
in ordnung | einverstanden | mach ruhig | leg los | nur zu | jep | jo | passt mach das
oui oui | oui allez y | oui fais le | fais le | faites le | absolument | tout à fait
évidemment | oui je confirme | volontiers | exactement | carrément
sí gracias | sí claro | desde luego | vale hazlo | sí adelante | venga | dale | sí confirmo
exacto | afirmativo
sì per favore | sì certo | certo che sì | vai | vai pure | procedi pure | fallo pure
sì procedi | sì confermo | assolutamente sì | esatto | senz'altro | ovviamente | volentieri
ja doe het maar | ja ga je gang | ja prima | ja zeker | ja is goed | ja hoor | ja klopt
doe het maar | ga je gang | ga maar | ga door | doe het gerust | zeker weten | natuurlijk
uiteraard | oké | is goed | in orde | prima doe maar
tak śmiało | śmiało | dawaj | tak jasne | tak oczywiście | pewnie | no pewnie | tak dobrze
okej | tak potwierdzam | do dzieła | wykonaj | tak wykonaj | jak najbardziej | tak jest
zdecydowanie tak | no jasne
sim faz isso | sim faça | sim pode | sim avança | sim avance | sim claro | podes | faz
faça | força | avança | avance | está bem | sim ok | exatamente | sim tenho a certeza
sim quero | quero | sim é isso
pode fazer | sim faz | tá bom | beleza | manda ver | vai em frente | pode ir | isso mesmo
sim eu quero
ja kör | ja visst | ja absolut | ja varsågod | ja det går bra | japp | jepp | jajamen
självklart | såklart | okej gör det | kör | kör på | kör bara | varsågod | det går bra
gärna | absolut gör det | ja kör på
ja bare gør det | gør det bare | bare gør det | det er ok | fint | helt fint
ja selvfølgelig | naturligvis | klart | ja klart | ja tak gør det | det må du gerne
det er i orden | javel | kør | kør bare | jeg bekræfter | gå bare i gang | ja fortsæt
gerne
ja takk | ja gjerne | gjerne | ja gjør det | ja bare gjør det | gjør det | bare gjør det
gjør det bare | okei | det er greit | greit | helt greit | selvsagt | kjør på | bare kjør
sett i gang | bekreftet | jeg bekrefter | ja fortsett | absolutt
kyllä | joo | juu | kyllä kiitos | joo kiitos | kyllä tee se | joo tee se | tee se
tee vaan | tee se vaan | selvä | hyvä on | sopii | käy | se käy | anna mennä | mene vaan
ilman muuta | tietysti | totta kai | toki | kyllä vain | ehdottomasti | vahvistan
jatka vaan
ano | ano prosím | ano udělej to | ano proveď to | jo udělej to | jasně | jasně udělej to
určitě | samozřejmě | no jasně | dobře | dobře udělej to | v pořádku | souhlasím | potvrzuji
potvrzuju | proveď to | udělej to | do toho | pusť se do toho | klidně | ano souhlasím
да | да пожалуйста | да давай | да делай | да сделай это | да выполняй | конечно
конечно да | давай | давай делай | делай | сделай это | выполняй | хорошо | ладно | ок
окей | согласен | согласна | подтверждаю | разрешаю | вперёд | действуй | безусловно
да подтверждаю
так | так будь ласка | так давай | так роби | так зроби це | так виконуй | звісно | звичайно
звісно так | давай роби | роби | зроби це | виконуй | добре | гаразд | згоден | згодна
підтверджую | дозволяю | вперед | дій | так підтверджую | авжеж
是 | 是的 | 是的 请执行 | 对 | 对的 | 好 | 好的 | 好的 执行吧 | 好啊 | 行 | 可以
可以的 | 没问题 | 当然 | 当然可以 | 确定 | 确认
执行吧 | 去做吧 | 做吧 | 嗯 好的 | 同意 | 请执行 | 就这么办
"""
# A question mark makes any reply a question ("Yes? What do you mean?", "Sí?").
_QUESTION_MARKS = ("?", "\u00bf", "\uff1f", "\u037e")  # ? ¿ fullwidth ? Greek ;
_PUNCTUATION = re.compile(r"[^\w\s']")


def normalized_reply(reply: str) -> str:
    """A reply as the yes list spells it: NFKC, case-folded, punctuation and spacing folded."""
    text = unicodedata.normalize("NFKC", reply).casefold().replace("\u2019", "'")
    return " ".join(_PUNCTUATION.sub(" ", text).split())


YES_REPLIES = frozenset(
    normalized_reply(phrase) for line in _YES_PHRASES.splitlines() for phrase in line.split("|")
) - {""}


def is_affirmative(reply: Any) -> bool:
    """True only for a whole reply that clearly says yes: "Yes, please." and "Ja, bitte!"
    count; "yes but wait", "Yes? What do you mean?", "OK, what's the weather?" and "no"
    do not."""
    if not isinstance(reply, str):
        return False
    if any(mark in reply for mark in _QUESTION_MARKS):
        return False
    return normalized_reply(reply) in YES_REPLIES

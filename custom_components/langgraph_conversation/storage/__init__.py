"""SQLite persistence under <config>/langgraph_conversation/.

Knows SQLite and LangGraph's storage interfaces only, nothing about Home Assistant or
models. `sqlite.py` opens a file (pragmas, schema versions, transactions);
`checkpointer.py` stores LangGraph checkpoints in one; `links.py` keeps, in the same
file, which thread each conversation id of each party continues.
"""

# shellcheck shell=bash
# A busy machine for scripts/test --cpu-hog: busy-loop processes beside the tests.
#
# They run at the tests' own priority (not niced): a niced loop yields nearly all of its
# CPU to the tests (under Linux's scheduler nice 19 weighs 1.5 % of nice 0), which is not
# what a loaded host or another test run does. Each is a plain `bash` loop, so the hog
# needs nothing installed. They are stopped by their process ids when the run exits (also
# on failure, Ctrl-C or SIGTERM); should scripts/test itself be killed outright, each loop
# notices within about a second that its parent is gone and ends by itself.
#
# start_cpu_hog N: starts N loops and the traps that stop them. stop_cpu_hog: stops them
# (again is harmless).

CPU_HOG_PIDS=()

start_cpu_hog() {
    local count=$1 parent=$$ i
    for ((i = 0; i < count; i++)); do
        # Busy for ~0.2 s of arithmetic at a time, then a check that the run still exists.
        bash -c 'while kill -0 "$1" 2>/dev/null; do n=0; while ((n < 100000)); do ((n++)); done; done' \
            lgc-cpu-hog "$parent" &
        CPU_HOG_PIDS+=($!)
    done
    trap stop_cpu_hog EXIT
    trap 'stop_cpu_hog; exit 130' INT
    trap 'stop_cpu_hog; exit 143' TERM
    trap 'stop_cpu_hog; exit 129' HUP
    log "CPU hog: ${#CPU_HOG_PIDS[@]} busy-loop processes (pids ${CPU_HOG_PIDS[*]}) beside the tests, on $(nproc) CPUs"
}

stop_cpu_hog() {
    [ ${#CPU_HOG_PIDS[@]} -gt 0 ] || return 0
    local pid
    for pid in "${CPU_HOG_PIDS[@]}"; do
        kill "$pid" 2>/dev/null
    done
    for pid in "${CPU_HOG_PIDS[@]}"; do
        wait "$pid" 2>/dev/null
    done
    log "CPU hog: stopped ${#CPU_HOG_PIDS[@]} busy-loop processes"
    CPU_HOG_PIDS=()
}

#!/usr/bin/env python3
"""at-prompt.py WAIT_FOR SIGNAL -- COMMAND...: runs COMMAND on a new
pseudo-terminal (its controlling terminal, as a person's), waits until the
text WAIT_FOR appears on it (a prompt), then interrupts it: SIGNAL "ctrl-c"
types Ctrl-C (the terminal sends SIGINT to its foreground process group,
as when a person presses it), "term" sends SIGTERM to the process. Then
prints what happened, one line each, for the test to judge:

  status: signal N | exit N
  echo: on | off          (the terminal's ECHO flag after COMMAND is gone)
  output: ...             (what COMMAND wrote, one line, \\n escaped)

Exit 0 when all that could be read, 1 when the prompt never came (within
60 s) or the command did not end (within 30 s after the signal): then
it is killed.
"""
import fcntl
import os
import select
import signal
import subprocess
import sys
import termios
import time


def main():
    if len(sys.argv) < 5 or sys.argv[3] != "--" or sys.argv[2] not in ("ctrl-c", "term"):
        sys.exit("usage: at-prompt.py WAIT_FOR ctrl-c|term -- COMMAND...")
    wait_for, how, command = sys.argv[1].encode(), sys.argv[2], sys.argv[4:]
    master, slave = os.openpty()

    def controlling_terminal():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave,
                            preexec_fn=controlling_terminal, close_fds=True)
    output = b""

    def read_some(timeout):
        nonlocal output
        ready, _, _ = select.select([master], [], [], timeout)
        if ready:
            try:
                output += os.read(master, 4096)
            except OSError:
                pass

    deadline = time.monotonic() + 60
    while wait_for not in output:
        if proc.poll() is not None or time.monotonic() > deadline:
            read_some(0.2)
            proc.kill() if proc.poll() is None else None
            print("prompt never came; output: " + output.decode(errors="replace").replace("\n", "\\n"))
            return 1
        read_some(0.2)
    # The prompt is written before the terminal's echo is turned off:
    # wait until it is off, as it is while a person types.
    deadline = time.monotonic() + 10
    while termios.tcgetattr(slave)[3] & termios.ECHO and time.monotonic() < deadline:
        time.sleep(0.05)
    if how == "ctrl-c":
        os.write(master, b"\x03")
    else:
        os.kill(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while proc.poll() is None:
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            print("did not end after the signal; output: " + output.decode(errors="replace").replace("\n", "\\n"))
            return 1
        read_some(0.2)
    read_some(0.2)
    rc = proc.returncode
    print("status: " + (f"signal {-rc}" if rc < 0 else f"exit {rc}"))
    print("echo: " + ("on" if termios.tcgetattr(slave)[3] & termios.ECHO else "off"))
    print("output: " + output.decode(errors="replace").replace("\r", "").replace("\n", "\\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

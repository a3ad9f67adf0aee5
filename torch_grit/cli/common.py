"""What the converting subcommands share: how a failure is reported."""

import sys

from ..util import strict_json


def fail(args, code, message):
    """Report a failed run: an ``error`` JSON line under --json, the message on stderr
    (``torch-grit <subcommand>: ...``); returns the exit code."""
    if args.json:
        try:
            print(strict_json.dumps({"event": "error", "exit_code": code, "message": message}), flush=True)
        except BrokenPipeError:
            pass
    print("torch-grit %s: %s" % (args.cmd, message), file=sys.stderr)
    return code

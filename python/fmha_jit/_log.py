"""The C++ library's log lines (compiles, fallbacks, warnings) on the "fmha_jit" logger."""

import atexit
import logging

from fmha_jit import _C

logger = logging.getLogger("fmha_jit")


def _forward(level: int, message: str) -> None:
    logger.log(level, message)


_C._set_log_handler(_forward)
# Before the interpreter goes: a line logged later (a static destructor) goes to stderr instead.
atexit.register(_C._set_log_handler, None)

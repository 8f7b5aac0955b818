"""``SCHEMATHESIS_HOOKS=tests.schemathesis_hooks st run …``: the rules of tests/schemathesis_rules.py."""

from __future__ import annotations

import schemathesis

from tests.schemathesis_rules import before_call

schemathesis.hook("before_call")(before_call)

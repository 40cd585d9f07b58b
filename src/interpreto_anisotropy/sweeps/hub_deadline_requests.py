# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""`commons.hub_deadline_requests` under its former name (the module itself: tangents and sweeps share it)."""

import sys

from ..commons import hub_deadline_requests as _module

sys.modules[__name__] = _module

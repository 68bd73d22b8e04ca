"""The build backend: meson-python, except that the wheel is tagged for the oldest CPython the
extension serves (cp310-abi3), not for the interpreter that happens to build it.

meson-python tags a limited-API wheel cpXY-abi3 with XY the building interpreter, so a wheel
built by 3.11 would refuse to install on 3.10 although its extension only uses the 3.10 stable
ABI (python/meson.build: limited_api '3.10'). Only the interpreter part of the tag changes, and
the result is checked, so a meson-python that builds differently fails loudly instead of
producing a mislabelled wheel. Not for anything else: every other hook is meson-python's."""

import sys

import mesonpy
import mesonpy._tags
from mesonpy import (  # noqa: F401 (the hooks this backend passes through)
    build_editable,
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
)

LIMITED_API_TAG = "cp310"  # python/meson.build: limited_api : '3.10'


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    if sys.implementation.name != "cpython":
        return mesonpy.build_wheel(wheel_directory, config_settings, metadata_directory)
    original = mesonpy._tags.get_interpreter_tag
    mesonpy._tags.get_interpreter_tag = lambda: LIMITED_API_TAG
    try:
        name = mesonpy.build_wheel(wheel_directory, config_settings, metadata_directory)
    finally:
        mesonpy._tags.get_interpreter_tag = original
    if f"-{LIMITED_API_TAG}-abi3-" not in name:
        raise RuntimeError(f"snapcell_backend: expected a {LIMITED_API_TAG}-abi3 wheel, got {name}")
    return name

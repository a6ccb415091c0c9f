"""What keeps a vendor profile's driver from starting on drakit's local cluster, said in one line
before the cluster starts (``drakit run --cluster local --vendor P``): a program named by
``plugin.binary`` (or the controller's) that is not there, or a plugin that ``needs`` NRI or the
stock node paths on nodes of the fake runtime, with the profile's ``build`` line saying what to
build. ``drakit lint --vendor`` says the same of a missing program (:func:`program_problem`).
Anything else about the profile is reported where it is loaded."""

from __future__ import annotations

import os
from typing import Any


def plugin_problem(args: Any) -> str | None:
    """One line for ``drakit run`` (``args``: its options), or None."""
    from drakit.fake_driver.profile import ProfileError, load_vendor_profile
    profile_path = str(args.vendor)
    from drakit.clusters.local import kubeletnode
    unavailable = kubeletnode.unavailable_reason()  # then kwok nodes: no runtime at all
    runtime = (args.runtime or os.environ.get("DRAKIT_RUNTIME") or kubeletnode.default_runtime(unavailable)
               if unavailable is None else None)
    try:
        profile = load_vendor_profile(profile_path)
    except ProfileError:
        return None  # said where the run loads it
    dut = profile.under_test
    if dut is None or dut.plugin is None:
        return None
    from drakit.clusters.local.vendorplugin import needs_problem
    problem = needs_problem(dut.driver, dut.plugin.needs, runtime)
    if problem:
        return f"--vendor {profile_path}: {problem}"
    problem = program_problem(profile, profile_path)
    return f"--vendor {profile_path}: {problem}" if problem else None


def program_problem(profile: Any, profile_path: str) -> str | None:
    """One line when a program the profile names by ``binary`` is not there (an unset variable, a
    missing file), ending with its ``build`` line; None when all are there."""
    from drakit.clusters.local.driverbuild import DriverBuildError, resolve
    dut = profile.under_test
    for role, spec in (("plugin", dut.plugin), ("controller", dut.controller)) if dut is not None else ():
        if spec is not None and spec.binary is not None:
            try:
                resolve(spec, profile_path)
            except DriverBuildError as exc:
                hint = f"; build: {spec.build_hint}" if spec.build_hint else ""
                return f"the driver's {role} program: {exc}{hint}"
    return None

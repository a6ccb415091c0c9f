"""What keeps a vendor profile's driver from starting on drakit's local cluster, said in one line
before the cluster starts (``drakit run --cluster local --vendor P``): a program named by
``plugin.binary`` (or the controller's) that is not there, or a plugin that ``needs`` NRI or the
stock node paths on nodes of the fake runtime, with the profile's ``build`` line saying what to
build. ``drakit lint --vendor`` says the same of a missing program (:func:`program_problems`).
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


def program_problems(profile: Any) -> list[str]:
    """What keeps the programs a vendor profile names from starting on this host, one line each
    (``drakit lint --vendor``): the plugin's and the controller's ``binary`` as ``drakit run``
    resolves it (a bare name on PATH, a path relative to the profile's folder, ``$VARS``), and
    the first word of each ``command`` with its placeholders filled in as they would be
    (``{binary}``, ``{drakitBin}``: drakit's binary cache, ``{profileDir}``); each must be a
    regular file this user may execute. A program built by drakit (``goInstall``, ``source``) is
    built by the run, and a first word naming a per-node folder is only known then: neither is
    checked here."""
    dut = profile.under_test
    if dut is None:
        return []
    from drakit.clusters.local.build import bin_dir
    from drakit.clusters.local.driverbuild import DriverBuildError, target
    problems: list[str] = []
    for role, spec in (("plugin", dut.plugin), ("controller", dut.controller)):
        if spec is None:
            continue
        values = {"drakitBin": str(bin_dir()), "profileDir": spec.profile_dir or "."}
        build = f"; build: {spec.build_hint}" if spec.build_hint else ""  # the profile's line of what to build
        if spec.binary is not None:
            try:
                values["binary"] = str(target(spec))
            except DriverBuildError as exc:
                problems.append(f"driverUnderTest.{role}: {exc}{build}")
                continue
            problem = _not_runnable(values["binary"], spec.binary)
            if problem:
                problems.append(f"driverUnderTest.{role}.binary: {problem}{build}")
                continue
        first = spec.command[0] if spec.command else ""
        try:
            program = first.format_map(values)
        except (KeyError, ValueError, IndexError, AttributeError):  # a per-node placeholder: known at run time
            continue
        if first == "{binary}":
            continue  # checked above (or built by the run)
        if "/" not in program:
            import shutil
            found = shutil.which(program)
            if found is None:
                problems.append(f"driverUnderTest.{role}.command[0]: {program}: no such program on PATH")
            continue
        if not os.path.isabs(program):
            program = os.path.join(spec.profile_dir or ".", program)
        hint = " ('drakit cluster build' puts upstream's test driver there)" if "{drakitBin}" in first else ""
        problem = _not_runnable(program, first)
        if problem:
            problems.append(f"driverUnderTest.{role}.command[0]: {problem}{hint}")
    return problems


def _not_runnable(path: str, named: str) -> str | None:
    """Why *path* (as the profile *named* it) cannot be executed, or None."""
    import stat
    shown = path if path == named else f"{named} ({path})"
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"{shown}: {'no such program' if exc.strerror == 'No such file or directory' else exc.strerror}"
    if stat.S_ISDIR(st.st_mode):
        return f"{shown}: is a folder, not a program"
    if not stat.S_ISREG(st.st_mode):
        return f"{shown}: not a regular file"
    if not os.access(path, os.X_OK):
        return f"{shown}: not executable (chmod +x)"
    return None

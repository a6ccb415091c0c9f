"""The documentation: the site builds with ``mkdocs build --strict`` (a broken link, a missing
page or a page left out of the nav fails), the generated references match the code, the
tutorial's case files pass, and the README stays a short user README."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
TUTORIAL = DOCS / "tutorial"


def _regenerate() -> ModuleType:
    spec = importlib.util.spec_from_file_location("drakit_docs_regenerate", DOCS / "regenerate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_references_are_current() -> None:
    stale = _regenerate().stale()
    assert not stale, ("stale generated docs (run: python docs/regenerate.py): "
                       + ", ".join(str(p.relative_to(ROOT)) for p in stale))


def test_staleness_check_sees_a_changed_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    regen = _regenerate()
    target = tmp_path / "cli.md"
    target.write_text(regen.cli_md().replace("drakit run", "drakit walk", 1))
    monkeypatch.setattr(regen, "targets", lambda: {target: regen.cli_md})
    assert regen.stale() == [target]
    assert regen.main(["--check"]) == 1
    assert regen.main([]) == 0 and regen.stale() == []


def test_cli_reference_lists_every_subcommand_with_a_description() -> None:
    text = (DOCS / "reference" / "cli.md").read_text()
    for command in ("run", "report", "lint", "features", "cluster up", "driver serve", "driver sample-claims",
                    "node-check", "node-agent"):
        section = text.split(f"`drakit {command}`", 2)
        assert len(section) >= 2, command
    # no subcommand heading is followed directly by its argument table: each has a sentence
    for m in re.finditer(r"^#+ `drakit [^`]+`\n\n(.*)$", text, re.M):
        assert not m.group(1).startswith("|"), m.group(0)


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.fail("mkdocs and mkdocs-material are not installed in this venv: pip install -e '.[test]'")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-5000:]
    page = (tmp_path / "site" / "tutorial" / "first-case" / "index.html").read_text()
    assert "tutorial/one-gpu" in page and "tutorial/no-such-model" in page and "tutorial/from-template" in page


def test_tutorial_page_shows_every_tutorial_case_file_as_it_is() -> None:
    """The page holds each tested file's text itself (a mkdocs include line would show raw where
    the page is read on GitHub, as the README links it), and the copy is the file."""
    page = (TUTORIAL / "first-case.md").read_text()
    assert "--8<--" not in page
    blocks = re.findall(r"```yaml\n(.*?)```", page, re.S)
    files = sorted(TUTORIAL.glob("*.case.yaml"))
    assert len(files) == 3, files
    for path in files:
        assert path.read_text() in blocks, f"{path.name}: the page's copy differs from the file (or is missing)"


def test_tutorial_cases_pass_on_the_reference_backend(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", "run", str(TUTORIAL), "--out", str(out),
                          "--plain"], capture_output=True, text=True, timeout=600)
    results = json.loads((out / "results.json").read_text())
    statuses = {c["id"]: c["status"] for c in results["cases"]}
    assert statuses == {"tutorial/one-gpu": "passed", "tutorial/select-by-model": "passed",
                        "tutorial/no-such-model": "passed", "tutorial/from-template": "passed"}, res.stdout[-3000:]
    assert res.returncode == 0


def test_readme_is_a_short_user_readme() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 250
    # lab notes belong in reports, history in CHANGELOG.md
    for word in ("session", "sitting", "load average", "earlier run", "not met"):
        assert word not in text.lower(), word
    # the two set-up commands, as .ci/run runs the second
    assert ".venv/bin/drakit run --out drakit-out" in text
    assert ".venv/bin/drakit cluster build && .venv/bin/python -m pytest -n 2" in text


def test_readme_has_the_exit_codes_and_every_limits_knob() -> None:
    """Issue 25: the README's exit-code table and limits with how to raise them, in step with the
    full tables of docs/guide/ci.md (every knob named there is in the README too)."""
    import re
    readme = (ROOT / "README.md").read_text()
    for code in ("| 0 |", "| 1 |", "| 2 |", "| 3 |", "| 130 / 143 |"):
        assert code in readme, code
    ci = (DOCS / "guide" / "ci.md").read_text()
    limits = ci.split("## Limits", 1)[1].split("\n## ", 1)[0]
    knobs = {k for row in limits.splitlines() if row.startswith("| ") and not row.startswith("| what")
             for k in re.findall(r"`((?:DRAKIT_[A-Z_]+|--[a-z-]+|timeBudget|TMPDIR))", row.rsplit("|", 2)[-2])}
    assert len(knobs) >= 6, knobs
    assert not [k for k in knobs if k not in readme], knobs


def test_docs_name_no_machine_paths() -> None:
    for path in [ROOT / "README.md", ROOT / "CHANGELOG.md", *DOCS.rglob("*.md")]:
        text = path.read_text()
        for bad in ("/root/", "/home/", "/work/", "/tmp/"):
            assert bad not in text, f"{path.relative_to(ROOT)}: {bad}"


def test_ci_recipes_are_valid_yaml_and_use_real_commands() -> None:
    import shlex

    import yaml

    from drakit.conformance.cli import _parser
    text = (DOCS / "guide" / "ci.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    assert len(blocks) == 2
    docs = [yaml.safe_load(b) for b in blocks]
    assert "jobs" in docs[0] and "dra-conformance" in docs[1]
    parser = _parser()
    code = "\n".join(re.findall(r"```(?:yaml|sh)\n(.*?)```", text, re.S))
    commands = re.findall(r"(?:\.venv/bin/)?drakit ((?:run|cluster up|cluster down|cluster build)[^\n|]*)", code)
    assert len(commands) >= 4
    for command in commands:
        args = shlex.split(command.split(" #")[0])
        parser.parse_args(args)  # exits (fails the test) on an unknown flag


# -- every command example of README.md and docs/ -------------------------------------------------
# Each command in a sh/bash/console block (and each "$ " line of a text block) is a test item: it
# runs in a folder holding the repository's examples and suites, or is skipped with the reason
# below, so that no example is silently left unrun. A new example that needs a cluster must be
# matched here, with its reason.
NOT_HERE = (
    (r"^python3 -m venv|pip install|^\. \.venv/bin/activate", "sets up the virtual environment this test runs in"),
    (r"drakit cluster build-driver", "builds a driver from its checkout with Go"),
    (r"drakit cluster build\b", "builds the local control plane with Go (minutes; CI does it once)"),
    (r"python -m pytest", "the kit's own tests, of which this is one"),
    (r"\[|\.\.\.|NS/NAME", "a synopsis: brackets and capitals are placeholders"),
    (r"--cluster local|--backend [a-z,]*cluster|--kubeconfig|--in-cluster|cluster up|^sonobuoy |^kubectl ",
     "needs a cluster"),
    (r"^echo ", "shell: shows the exit code of the command before it"),
)
SANDBOX_LINKS = ("conformance", "docs", "examples", "fake_driver")
# exit codes other than 0 that an example shows on purpose (docs/guide/explain.md: 1 when the pod cannot fit)
EXIT_CODES = ((r"^drakit explain pod demo/trainer ", 1),)


def _doc_commands() -> list[tuple[str, str, list[str]]]:
    """(where, command as written, the output lines shown after it) of every command example."""
    found: dict[str, tuple[str, str, list[str]]] = {}
    for path in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        text = path.read_text()
        for m in re.finditer(r"^( *)```(\w*)\n(.*?)^\1```", text, re.S | re.M):
            lang, body = m.group(2), re.sub(r"\\\n\s*", " ", m.group(3))
            line = text.count("\n", 0, m.start()) + 2
            rows = body.splitlines()
            for i, raw in enumerate(rows):
                raw = raw.strip()
                if lang == "text" and raw.startswith("$ "):
                    shown = rows[i + 1:]
                    shown = shown[:shown.index("...")] if "..." in shown else shown
                    raw = raw[2:]
                elif lang in ("sh", "bash", "shell", "console") and raw and not raw.startswith("#"):
                    shown = []
                else:
                    continue
                for part in re.split(r"\s+#", raw)[0].split(" && "):  # a trailing comment off; each command of a && chain
                    where = f"{path.relative_to(ROOT)}:{line + i}"
                    found.setdefault(part.strip(), (where, part.strip(), shown))
    return list(found.values())


DOC_COMMANDS = _doc_commands()


def test_the_docs_have_command_examples() -> None:
    assert len(DOC_COMMANDS) >= 30, len(DOC_COMMANDS)
    ran = [c for _, c, _ in DOC_COMMANDS if not any(re.search(p, c) for p, _ in NOT_HERE)]
    assert len(ran) >= 12, ran


@pytest.mark.parametrize("where, command, shown", DOC_COMMANDS, ids=[f"{w} {c[:70]}" for w, c, _ in DOC_COMMANDS])
def test_doc_command_runs(where: str, command: str, shown: list[str], tmp_path: Path) -> None:
    import shlex
    import shutil
    reason = next((why for pattern, why in NOT_HERE if re.search(pattern, command)), None)
    if reason is not None:
        pytest.skip(f"{where}: {reason}")
    for name in SANDBOX_LINKS:
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    shutil.copytree(TUTORIAL, tmp_path / "my-cases")
    for profile in ("my-driver.yaml", "my-gpu.yaml"):
        shutil.copy(ROOT / "examples" / "vendor-example.yaml", tmp_path / profile)
    args = shlex.split(command)
    assert args[0] in ("drakit", ".venv/bin/drakit"), f"{where}: {command}: not a drakit command; run it here or add it to NOT_HERE"
    res = subprocess.run([sys.executable, "-m", "drakit.conformance.cli", *args[1:]], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    code = next((c for pattern, c in EXIT_CODES if re.search(pattern, command)), 0)
    assert res.returncode == code, f"{where}: {command}: exit {res.returncode}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}"
    assert res.stdout.splitlines()[:len(shown)] == shown, f"{where}: the output shown differs from what it prints"

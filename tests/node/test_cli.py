"""The command-line pieces: driver sample-claims / serve errors, node-agent --prepare."""

from __future__ import annotations

import argparse
import json

from drakit.clusters.nodeagent import cli as agent_cli
from drakit.fake_driver import cli as driver_cli
from drakit.fake_driver.sampleclaims import sample_claims

from .conftest import GPU, NODE


def parse(module, argv):
    parser = argparse.ArgumentParser(prog="drakit")
    module.add_parsers(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_sample_claims(short_tmp, inventory, capsys):
    out = short_tmp / "claims.json"
    args = parse(driver_cli, ["driver", "sample-claims", "--driver", GPU, "--node", NODE, "--out", str(out)])
    assert driver_cli.run(args) == 0
    assert json.loads(out.read_text()) == sample_claims(inventory, GPU)
    bad = parse(driver_cli, ["driver", "sample-claims", "--driver", "nope.example.com", "--node", NODE])
    assert driver_cli.run(bad) == 2
    assert "nope.example.com" in capsys.readouterr().err


def test_serve_reports_bad_input_in_one_line(short_tmp, capsys):
    args = parse(driver_cli, ["driver", "serve", "--driver", GPU, "--node", NODE,
                              "--plugin-dir", str(short_tmp / "p"), "--registry-dir", str(short_tmp / "r"),
                              "--cdi-dir", str(short_tmp / "c"), "--claims", str(short_tmp),
                              "--hardware", "no-such-shape"])
    assert driver_cli.run(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("drakit driver serve: ") and "no-such-shape" in err and len(err.splitlines()) == 1
    args.hardware = "server-8gpu"
    args.metadata_versions = ["v1alpha1"]
    args.device_metadata = True
    assert driver_cli.run(args) == 2
    assert "v1beta1 is required" in capsys.readouterr().err


def test_node_agent_prepare_command(start_plugin, short_tmp, inventory, capsys):
    claims = sample_claims(inventory, GPU)
    start_plugin(GPU, claims)
    claims_file = short_tmp / "pod-claims.json"
    claims_file.write_text(json.dumps([c for c in claims if c["metadata"]["name"] == "multi"]))
    args = parse(agent_cli, ["node-agent", "--registry-dir", str(short_tmp / "registry"), "--node", NODE,
                             "--prepare", str(claims_file), "--unprepare"])
    assert agent_cli.run(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["prepare"]["ok"] and out["unprepare"]["ok"]
    assert [d["device"] for d in out["prepare"]["claims"][0]["devices"]] == ["gpu0", "gpu1"]

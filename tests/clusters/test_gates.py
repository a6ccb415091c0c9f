"""drakit.clusters.local.gates: gate and controller names from sample --help text (no binaries needed)."""

from __future__ import annotations

import pytest

from drakit.clusters.local import gates

# Shape of a 1.37 component's --feature-gates help (abridged, invented names mixed in).
HELP = """\
      --feature-gates colonSeparatedMultimapStringString   Comma-separated list of component:key=value pairs that describe feature gates.
                                                           If the component is not specified, defaults to "kube". For example: --feature-gates 'wardle:featureA=true'Options are:
                                                           kube:APIResponseCompression=true|false (BETA - default=true)
                                                           kube:AllAlpha=true|false (ALPHA - default=false)
                                                           kube:AllBeta=true|false (BETA - default=false)
                                                           kube:DRAConsumableCapacity=true|false (BETA - default=true)
                                                           kube:DRADerivedAttributes=true|false (ALPHA - default=false)
                                                           kube:DRAFractionalCapacityRange=true|false (BETA - default=false), or DRAFractionalCapacityRange=true|false (BETA - default=true) if --min-compatibility-version>=1.37
                                                           kube:DRAPartitionableDevices=true|false (BETA - default=true)
                                                           kube:DRAWorkloadResourceClaims=true|false (BETA - default=false)
                                                           kube:GenericWorkload=true|false (BETA - default=false)
                                                           kube:SchedulerPreQueueingHints=true|false (ALPHA - default=false)
                                                           wardle:BananaSplit=true|false (ALPHA - default=false)
      --help                                               help for kube-apiserver
"""

KCM_HELP = """\
      --controllers strings                      A list of controllers to enable. '*' enables all on-by-default controllers, 'foo' enables the controller named 'foo', '-foo' disables the controller named 'foo'.
                                                 All controllers: bootstrap-signer-controller, cronjob-controller, device-taint-eviction-controller,
                                                 node-lifecycle-controller, resourceclaim-controller, resourcepoolstatusrequest-controller,
                                                 token-cleaner-controller
                                                 Disabled-by-default controllers: bootstrap-signer-controller, resourcepoolstatusrequest-controller, token-cleaner-controller (default [*])
      --disable-attach-detach-reconcile-sync     Disable volume attach detach reconciler sync.
"""


def test_parse_help_gates():
    known = gates.parse_help_gates(HELP)
    assert known["DRADerivedAttributes"] == gates.Gate("DRADerivedAttributes", "ALPHA", False)
    assert known["DRAPartitionableDevices"].default is True
    # first listing wins for the min-compatibility-version form
    assert known["DRAFractionalCapacityRange"].default is False
    assert "AllAlpha" not in known and "AllBeta" not in known
    assert "BananaSplit" in known  # other components' gates are names too


def test_default_dra_gates_are_every_listed_dra_gate_plus_companions():
    wanted = gates.default_dra_gates(gates.parse_help_gates(HELP))
    assert wanted == {
        "DRAConsumableCapacity": True,
        "DRADerivedAttributes": True,
        "DRAFractionalCapacityRange": True,
        "DRAPartitionableDevices": True,
        "DRAWorkloadResourceClaims": True,
        "GenericWorkload": True,
        "SchedulerPreQueueingHints": True,
    }


def test_parse_gate_string():
    assert gates.parse_gate_string("A=true, kube:B=False,") == {"A": True, "B": False}
    for bad in ("A", "A=yes", "=true", "A B=true"):
        with pytest.raises(gates.GateError, match="malformed"):
            gates.parse_gate_string(bad)


def test_resolve_passes_listed_names_per_binary():
    known = {"kube-apiserver": gates.parse_help_gates(HELP), "kube-scheduler": {}}
    per = gates.resolve_gates({"DRADerivedAttributes": True}, known)
    assert per == {"kube-apiserver": {"DRADerivedAttributes": True}, "kube-scheduler": {}}


def test_unlisted_name_is_probed_and_unknown_name_is_a_clear_error():
    known = {"kube-apiserver": gates.parse_help_gates(HELP)}
    ga = {"DynamicResourceAllocation"}
    probe = lambda binary, name, value, others=None: name in ga  # noqa: E731
    per = gates.resolve_gates({"DynamicResourceAllocation": True}, known, probe)
    assert per["kube-apiserver"] == {"DynamicResourceAllocation": True}
    with pytest.raises(gates.GateError) as e:
        gates.resolve_gates({"DRAPartitionableDevice": True, "Nonsense": True}, known, probe)
    msg = str(e.value)
    assert "DRAPartitionableDevice (did you mean DRAPartitionableDevices" in msg
    assert "Nonsense" in msg and "kube-apiserver" in msg


def test_controllers_flag_enables_dra_controllers():
    ctrl = gates.parse_help_controllers(KCM_HELP)
    assert "device-taint-eviction-controller" in ctrl.all
    assert ctrl.disabled_by_default == (
        "bootstrap-signer-controller",
        "resourcepoolstatusrequest-controller",
        "token-cleaner-controller",
    )
    assert gates.controllers_flag(ctrl) == "*,resourcepoolstatusrequest-controller"
    assert gates.controllers_flag(ctrl, disable=["node-lifecycle-controller", "absent"]) == (
        "*,resourcepoolstatusrequest-controller,-node-lifecycle-controller"
    )


def test_controllers_flag_needs_the_claim_controller():
    ctrl = gates.Controllers(("cronjob-controller",), ())
    with pytest.raises(gates.GateError, match="resource claim controller"):
        gates.controllers_flag(ctrl)


def test_component_gates_change_one_component_only():
    known = {"kube-apiserver": gates.parse_help_gates(HELP), "kube-scheduler": gates.parse_help_gates(HELP)}
    per = gates.resolve_gates({"DRAPartitionableDevices": True}, known)
    gates.apply_component_gates(per, known, {"kube-scheduler": {"DRAPartitionableDevices": False}})
    assert per == {"kube-apiserver": {"DRAPartitionableDevices": True}, "kube-scheduler": {"DRAPartitionableDevices": False}}
    with pytest.raises(gates.GateError, match="kube-scheduler does not know feature gate Nonsense"):
        gates.apply_component_gates(per, known, {"kube-scheduler": {"Nonsense": False}})
    with pytest.raises(gates.GateError, match="kubelet: not a component"):
        gates.apply_component_gates(per, known, {"kubelet": {"DRAPartitionableDevices": False}})

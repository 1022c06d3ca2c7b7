"""The lab's Redfish vendor profiles: chosen per node (spec, CLI, inventory), and the
VendorBmc layer played without a network on a fake clock (over a stub emulator)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from harness.errors import ConfigError
from harness.lab.bmc.profiles import PROFILES, RedfishProfile, profile
from harness.lab.bmc.vendor import SESSIONS, VendorBmc
from harness.lab.cli import parse_redfish_profiles
from harness.lab.inventory_out import inventory_doc
from harness.lab.spec import LabSpec
from tests.fakes.clock import FakeClock

BASIC = "Basic bGFiOnB3"
SYSTEM = "/redfish/v1/Systems/abc"


def spec(tmp_path: Path, **profiles: str) -> LabSpec:
    return LabSpec(
        state_dir=str(tmp_path / "lab"),
        racks=1,
        workers_per_rack=2,
        control_planes=1,
        redfish_profiles=dict(profiles),
    )


def test_profiles_are_data_with_the_documented_differences() -> None:
    assert "PowerCycle" not in PROFILES["ilo"].reset_types
    assert "PowerCycle" not in PROFILES["supermicro"].reset_types
    assert PROFILES["bmcweb"].reset_status == 202
    assert PROFILES["supermicro"].max_sessions == 16
    assert PROFILES["xcc"].throttle_every > 0
    with pytest.raises(ValueError, match="unknown Redfish profile 'hp'; valid: bmcweb, idrac"):
        profile("hp")
    with pytest.raises(ValueError, match="unknown ResetTypes \\['Hibernate'\\]"):
        RedfishProfile("x", "v", "p", reset_types=("On", "Hibernate"))


def test_a_node_profile_points_its_inventory_entry_at_the_profile_port(tmp_path: Path) -> None:
    lab = spec(tmp_path, **{"*": "idrac"})
    names = [n.name for n in lab.nodes()]
    lab = spec(tmp_path, **{"*": "idrac", names[0]: "ilo"})
    entries = {e["name"]: e for e in inventory_doc(lab)["nodes"]}

    ilo = entries[names[0]]["power"]
    idrac = entries[names[1]]["power"]
    assert ilo["driver"] == idrac["driver"] == "redfish"
    assert ilo["endpoint"] == f"https://127.0.0.1:{lab.ports.redfish_vendor('ilo')}"
    assert idrac["endpoint"] == f"https://127.0.0.1:{lab.ports.redfish_vendor('idrac')}"
    assert ilo["auth"] == "session"
    assert lab.redfish_profiles_used() == ["idrac", "ilo"]
    assert lab.all_ports()[lab.ports.redfish_vendor("ilo")] == "Redfish BMC, ilo profile"
    assert lab.ports.redfish_vendor("bmcweb") == lab.ports.redfish + 1
    assert max(lab.ports.redfish_vendor(p) for p in PROFILES) < lab.ports.etcd_client(0)


def test_no_profile_keeps_the_labs_own_bmc(tmp_path: Path) -> None:
    lab = spec(tmp_path)
    for entry in inventory_doc(lab)["nodes"]:
        for power in (entry["power"], *entry["power_alternatives"]):
            if power["driver"] == "redfish":
                assert power["endpoint"] == f"https://127.0.0.1:{lab.ports.redfish}"
                assert power["auth"] == "basic"


def test_bad_profile_options_name_the_flag_and_the_valid_values(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        spec(tmp_path, **{"*": "hpe"})
    assert caught.value.field == "--redfish-profile"
    assert "valid: bmcweb, idrac, ilo, xcc, supermicro" in str(caught.value)
    with pytest.raises(ConfigError, match="no node 'w-zz' in this lab; valid: \\*, "):
        spec(tmp_path, **{"w-zz": "ilo"})
    with pytest.raises(ConfigError, match="valid: NODE=PROFILE"):
        parse_redfish_profiles(["ilo"])
    assert parse_redfish_profiles(["*=ilo", "w-a1 = xcc"]) == {"*": "ilo", "w-a1": "xcc"}


# -- VendorBmc over a stub emulator -----------------------------------------------------


class Emulator:
    """What the VendorBmc passes requests to: one system, its power, the resets it got."""

    def __init__(self) -> None:
        self.state = "On"
        self.resets: list[str] = []

    def __call__(self, env: dict[str, Any], start: Callable[..., Any]) -> Iterable[bytes]:
        path, method = env["PATH_INFO"], env["REQUEST_METHOD"]
        if path == SYSTEM and method == "GET":
            body: dict[str, Any] = {
                "Id": "abc",
                "PowerState": self.state,
                "Actions": {"#ComputerSystem.Reset": {"target": f"{SYSTEM}/Actions/x"}},
            }
        elif path.endswith("ComputerSystem.Reset") and method == "POST":
            reset = json.loads(env["wsgi.input"].read())["ResetType"]
            self.resets.append(reset)
            self.state = "Off" if reset in ("ForceOff", "GracefulShutdown") else "On"
            start("204 No Content", [])
            return [b""]
        else:
            body = {"@odata.id": "/redfish/v1", "Systems": {}}
        start("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(body).encode()]


def bmc(prof: RedfishProfile, clock: FakeClock) -> tuple[VendorBmc, Emulator]:
    emulator = Emulator()
    layer = VendorBmc(
        prof,
        emulator,
        user_of=lambda header: "lab" if header == BASIC else None,
        login=lambda user, password: (user, password) == ("lab", "pw"),
        basic=BASIC,
        clock=clock,
    )
    return layer, emulator


def call(
    layer: VendorBmc, method: str, path: str, body: object = None, **headers: str
) -> tuple[int, dict[str, str], Any]:
    raw = b"" if body is None else json.dumps(body).encode()
    env = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "CONTENT_LENGTH": str(len(raw)),
        "wsgi.input": io.BytesIO(raw),
        "HTTP_AUTHORIZATION": BASIC,
        **{f"HTTP_{k.upper()}": v for k, v in headers.items()},
    }
    if "HTTP_X_AUTH_TOKEN" in env:
        del env["HTTP_AUTHORIZATION"]
    seen: dict[str, Any] = {}

    def start(status: str, hdrs: list[tuple[str, str]]) -> None:
        seen["status"], seen["headers"] = int(status.split()[0]), dict(hdrs)

    data = b"".join(layer(env, start))
    return seen["status"], seen["headers"], json.loads(data) if data else None


def test_a_202_task_runs_then_completes_and_power_state_shows_the_change_late() -> None:
    clock = FakeClock(start=100.0)
    layer, emulator = bmc(PROFILES["bmcweb"], clock)

    status, headers, task = call(
        layer, "POST", f"{SYSTEM}/Actions/ComputerSystem.Reset", {"ResetType": "ForceOff"}
    )
    assert (status, task["TaskState"]) == (202, "Running")
    assert emulator.resets == ["ForceOff"]  # the node acted at once
    assert call(layer, "GET", SYSTEM)[2]["PowerState"] == "PoweringOff"
    assert call(layer, "GET", headers["Location"])[0] == 202

    clock.advance(PROFILES["bmcweb"].readback_s)
    assert call(layer, "GET", SYSTEM)[2]["PowerState"] == "Off"
    status, _h, done = call(layer, "GET", headers["Location"])
    assert (status, done["TaskState"]) == (200, "Completed")
    allowed = call(layer, "GET", SYSTEM)[2]["Actions"]["#ComputerSystem.Reset"]
    assert allowed["ResetType@Redfish.AllowableValues"] == list(PROFILES["bmcweb"].reset_types)


def test_a_reset_the_profile_lacks_is_400_naming_the_valid_values() -> None:
    layer, emulator = bmc(PROFILES["ilo"], FakeClock(start=0.0))
    status, _h, body = call(
        layer, "POST", f"{SYSTEM}/Actions/ComputerSystem.Reset", {"ResetType": "PowerCycle"}
    )
    assert status == 400
    assert "valid values: On, ForceOff, GracefulShutdown" in body["error"]["message"]
    assert emulator.resets == []


def test_mapped_resets_and_an_ignored_graceful_shutdown() -> None:
    layer, emulator = bmc(PROFILES["idrac"], FakeClock(start=0.0))
    for reset in ("PushPowerButton", "Nmi", "PushPowerButton"):
        status, _h, _b = call(
            layer, "POST", f"{SYSTEM}/Actions/ComputerSystem.Reset", {"ResetType": reset}
        )
        assert status == 204
    assert emulator.resets == ["ForceOff", "On"]  # Nmi acts on nothing

    deaf = RedfishProfile(
        "deaf", "v", "p", reset_types=("On", "GracefulShutdown"), graceful_honoured=False
    )
    layer, emulator = bmc(deaf, FakeClock(start=0.0))
    status, _h, _b = call(
        layer, "POST", f"{SYSTEM}/Actions/ComputerSystem.Reset", {"ResetType": "GracefulShutdown"}
    )
    assert status == 204
    assert emulator.resets == []


def test_sessions_are_capped_token_authenticated_and_deleted() -> None:
    prof = RedfishProfile(
        "capped", "v", "p", reset_types=("On",), max_sessions=2, session_cap_status=400
    )
    layer, _emulator = bmc(prof, FakeClock(start=0.0))
    login = {"UserName": "lab", "Password": "pw"}

    assert call(layer, "POST", SESSIONS, {"UserName": "lab", "Password": "no"})[0] == 401
    made = [call(layer, "POST", SESSIONS, login) for _ in range(2)]
    assert [m[0] for m in made] == [201, 201]
    status, _h, body = call(layer, "POST", SESSIONS, login)
    assert status == 400
    assert body["error"]["code"].endswith("SessionLimitExceeded")

    token = made[0][1]["X-Auth-Token"]
    assert call(layer, "GET", SYSTEM, X_AUTH_TOKEN=token)[0] == 200
    assert call(layer, "GET", SYSTEM, X_AUTH_TOKEN="forged")[0] == 401
    root = call(layer, "GET", "/redfish/v1")[2]
    assert root["Links"]["Sessions"]["@odata.id"] == SESSIONS
    assert root["Vendor"] == "v"
    assert call(layer, "GET", SESSIONS)[2]["Members@odata.count"] == 2
    assert call(layer, "DELETE", made[0][1]["Location"], X_AUTH_TOKEN=token)[0] == 204
    assert layer.open_sessions() == 1
    assert call(layer, "GET", SYSTEM, X_AUTH_TOKEN=token)[0] == 401


def test_throttling_answers_every_nth_request_with_retry_after_but_not_a_logout() -> None:
    prof = RedfishProfile(
        "busy",
        "v",
        "p",
        reset_types=("On",),
        max_sessions=4,
        throttle_every=2,
        throttle_status=429,
        retry_after_s=3,
    )
    layer, _emulator = bmc(prof, FakeClock(start=0.0))
    statuses = [call(layer, "GET", SYSTEM) for _ in range(4)]
    assert [s[0] for s in statuses] == [200, 429, 200, 429]
    assert statuses[1][1]["Retry-After"] == "3"
    made = call(layer, "POST", SESSIONS, {"UserName": "lab", "Password": "pw"})
    assert made[0] == 201
    assert call(layer, "DELETE", made[1]["Location"])[0] == 204
    assert layer.throttled == 2

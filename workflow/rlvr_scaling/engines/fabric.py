"""Which transport a process's collectives used, read from the communication library itself.

Runs inside the engine's processes (verl's workers through the engine hooks, the preflight's
collective probe) and in the launcher; the standard library only, like the rest of `engines`.

- NCCL and RCCL say it in their initialisation output (NCCL_DEBUG=INFO, subsystems INIT and NET):
  the network plugin and, for libfabric, the provider ("NET/OFI Selected Provider is cxi" on
  Slingshot, LUMI user guide, PyTorch page), or their own IB or socket transport ("NET/IB : Using",
  "NET/Socket : Using"). The launcher points NCCL_DEBUG_FILE at the run's record folder, one file per
  process, and reads them here.
- Gloo prints nothing of its transport (torch 2.13, also at TORCH_CPP_LOG_LEVEL=INFO: measured). On
  Linux torch's Gloo has one transport, TCP; what shows where its traffic went are the TCP
  connections the process group opened: the local addresses of the sockets that appeared during its
  initialisation (from /proc), which name the interface it used.
"""

from __future__ import annotations

import os
import re
import socket
import struct
from collections.abc import Iterable

# Each node's own Ray resource (the launcher gives it, the preflight's probe places its ranks by it).
NODE_RESOURCE = "rlvr_node_{}"
NODE_VAR = "RLVR_NODE_NAME"  # set by each node's start (Ray's processes inherit it); else the host name
NCCL_DEBUG_NAMES = ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE")
NCCL_FILE_PREFIX = "nccl-"
# The step's Slingshot credentials, which Slurm's hpe_slingshot switch plugin puts into each task's
# environment (switch_p_job_attach): the VNIs the step may use, its CXI services, devices and traffic
# classes. libfabric's cxi provider takes the step's VNI from them; without them (libfabric 2.1,
# cxip_nic_get_best_rgroup_vni) it falls back to any CXI service whose UID matches, which is the
# step's only while the user holds one service on the node. Keys: the record's names for them.
SLINGSHOT_VARS = {
    "vnis": "SLINGSHOT_VNIS",
    "svc_ids": "SLINGSHOT_SVC_IDS",
    "devices": "SLINGSHOT_DEVICES",
    "tcs": "SLINGSHOT_TCS",
}


def nccl_debug_environment(record_dir: str) -> dict[str, str]:
    """NCCL's and RCCL's initialisation output, one file per process (host and pid in its name: the
    library fills in %h and %p) in the run's record folder, not on the console."""
    return {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,NET",
        "NCCL_DEBUG_FILE": f"{record_dir}/{NCCL_FILE_PREFIX}%h-%p.log",
    }


# RCCL's (and NCCL's) own lines: "Using network <name>" names the network the communicator took (its
# IB or Socket transport, or a plugin: aws-ofi-nccl 1.20.0 calls itself "Libfabric", older builds "AWS
# Libfabric"); the plugin's "NET/OFI Selected provider is <p>" names libfabric's provider (ROCm/rccl
# src/init.cc; aws/aws-ofi-nccl src/nccl_ofi_net.cpp).
USING_NETWORK = re.compile(r"Using network (.+?)\s*$")
OFI_PROVIDER = re.compile(r"NET/OFI Selected [Pp]rovider is ([A-Za-z0-9_]+)")
OWN_TRANSPORTS = ("ib", "socket")  # the library's own, by the names the record uses
# Without "Using network" (an older build, or output cut short): the transports' own start lines.
TRANSPORT_LINES = ((re.compile(r"NET/IB ?: Using"), "ib"), (re.compile(r"NET/Socket ?: Using"), "socket"))


def node_name() -> str:
    return os.environ.get(NODE_VAR) or socket.gethostname()


def slingshot_credentials() -> dict[str, str]:
    """The Slingshot variables this process has, by the record's names (empty off Slingshot)."""
    return {key: os.environ[name] for key, name in SLINGSHOT_VARS.items() if name in os.environ}


def nccl_transport(lines: Iterable[str]) -> tuple[str | None, str | None]:
    """The transport NCCL/RCCL chose, as `ofi-<provider>`, `ib` or `socket`, and the line that says
    so; (None, None) when the output holds none of them (NCCL_DEBUG not at INFO, or no communicator)."""
    network = provider = fallback = None
    for line in lines:
        if network is None and (match := USING_NETWORK.search(line)):
            network = (match[1].strip(), line.strip()[-300:])
        if provider is None and (match := OFI_PROVIDER.search(line)):
            provider = (match[1].lower(), line.strip()[-300:])
        for pattern, name in TRANSPORT_LINES:
            if fallback is None and pattern.search(line):
                fallback = (name, line.strip()[-300:])
    if network is not None:
        name, line = network
        if name.lower() in OWN_TRANSPORTS:
            return name.lower(), line
        # A plugin: libfabric's provider where it said, else the plugin's own name.
        return (f"ofi-{provider[0]}", provider[1]) if provider else (re.sub(r"\W+", "-", name.lower()), line)
    if provider is not None:
        return f"ofi-{provider[0]}", provider[1]
    return fallback if fallback else (None, None)


def _socket_inodes() -> set[str]:
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _address(hex_address: str) -> str:
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        ip = socket.inet_ntop(socket.AF_INET, struct.pack("<I", int(host, 16)))
    else:  # /proc prints IPv6 as four little-endian 32-bit words
        words = struct.unpack("<4I", raw)
        ip = socket.inet_ntop(socket.AF_INET6, struct.pack(">4I", *words))
        ip = ip.removeprefix("::ffff:")
    return f"{ip}:{int(port, 16)}"


def tcp_connections() -> set[tuple[str, str]]:
    """(local, remote) of this process's established TCP connections."""
    mine = _socket_inodes()
    found = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            rows = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[3] == "01" and fields[9] in mine:  # 01: ESTABLISHED
                found.add((_address(fields[1]), _address(fields[2])))
    return found


def gloo_transport(before: set[tuple[str, str]], after: set[tuple[str, str]]) -> dict[str, object]:
    """Gloo's record: TCP, and the local addresses of the connections its initialisation opened."""
    opened = sorted(after - before)
    return {
        "transport": "tcp",
        "local_addresses": sorted({local.rsplit(":", 1)[0] for local, _ in opened}),
        "evidence": f"{len(opened)} TCP connections opened by the process group's initialisation"
        + (f", e.g. {opened[0][0]} -> {opened[0][1]}" if opened else ""),
    }


def judge(expected: str, transports: dict[str, str | None], nodes: int) -> tuple[bool, str]:
    """Whether a run's collectives travelled as the site says (`transports`: node -> the transport
    its processes used, None where none was recorded). Only a multi-node run is judged: within a node
    the libraries use shared memory and the GPUs' own links, whatever their network is."""
    seen = ", ".join(f"{node} {transport or 'none recorded'}" for node, transport in sorted(transports.items()))
    if nodes <= 1:
        return True, f"one node: not judged (collectives stay within the node); recorded: {seen or 'nothing'}"
    if not transports:
        return False, f"no node recorded its collectives' transport; the site expects {expected} (fabric.transport)"
    wrong = ", ".join(f"{t} on {node}" for node, t in sorted(transports.items()) if t and t != expected)
    missing = ", ".join(node for node, t in sorted(transports.items()) if not t)
    if wrong or missing:
        found = [f"collectives over {wrong}"] if wrong else []
        found += [f"no transport recorded on {missing}"] if missing else []
        verdict = "not a measurement of the site's scaling"
        return False, f"{'; '.join(found)}; the site expects {expected} (fabric.transport): {verdict}"
    return True, f"{expected} on every node: {seen}"


CXI_TRANSPORT = "ofi-cxi"


def judge_credentials(expected: str, vnis: dict[str, list[str]], nodes: int) -> tuple[bool, str]:
    """On a Slingshot site (transport ofi-cxi), whether every node's ranks saw the step's VNI (`vnis`:
    node -> the VNIs its ranks recorded, an empty list where a rank had none). A multi-node run whose
    ranks had none took whichever CXI service libfabric found: not a run of the step's fabric."""
    if expected != CXI_TRANSPORT or nodes <= 1:
        return True, ""
    missing = ", ".join(node for node, seen in sorted(vnis.items()) if not seen)
    if not missing:
        return True, ""
    return False, (
        f"no Slingshot VNI recorded on {missing} ({SLINGSHOT_VARS['vnis']} not in its ranks' environment: "
        "libfabric's cxi provider then takes any CXI service of the user's, not the step's): "
        "not a measurement of the site's scaling"
    )

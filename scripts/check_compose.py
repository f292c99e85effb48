#!/usr/bin/env python3
"""Static checks of docker-compose.yml for machines without Docker (`make compose-check`).

It cannot start the containers; it checks what can go wrong silently:
the file parses, every image is pinned, every bind-mounted file exists, every
published port is on 127.0.0.1, named volumes are declared, network_mode /
depends_on name real services (service_healthy only on services with a healthcheck), and
what the native stack gives its services besides the shared config files is given here
too: Prometheus' rule files, the collector's feature gates (scripts/stack.sh).
Needs PyYAML.
"""

import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    declared_volumes = set(compose.get("volumes") or {})
    errors = []

    for name, svc in services.items():
        image = svc.get("image", "")
        tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""
        if not tag or tag == "latest":
            errors.append(f"{name}: image {image!r} is not pinned to a version tag")

        for volume in svc.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith((".", "/")):
                if not (ROOT / source).exists():
                    errors.append(f"{name}: bind-mounted {source} does not exist")
            elif source not in declared_volumes:
                errors.append(f"{name}: named volume {source!r} is not declared under volumes:")

        for port in svc.get("ports", []):
            if not str(port).startswith("127.0.0.1:"):
                errors.append(f"{name}: port {port!r} is not published on 127.0.0.1")

        network_mode = svc.get("network_mode", "")
        if network_mode.startswith("service:") and network_mode[len("service:"):] not in services:
            errors.append(f"{name}: network_mode names unknown service {network_mode!r}")
        if network_mode and svc.get("ports"):
            errors.append(f"{name}: publishes ports but shares another service's network")

        for dep, spec in (svc.get("depends_on") or {}).items():
            if dep not in services:
                errors.append(f"{name}: depends_on unknown service {dep!r}")
                continue
            condition = spec.get("condition", "service_started")
            if condition not in ("service_started", "service_healthy", "service_completed_successfully"):
                errors.append(f"{name}: depends_on {dep}: unknown condition {condition!r}")
            if condition == "service_healthy" and "healthcheck" not in services[dep]:
                errors.append(f"{name}: waits for {dep} to be healthy, but {dep} has no healthcheck")

    errors += native_stack_differences(services)
    for error in errors:
        print(f"docker-compose.yml: {error}", file=sys.stderr)
    if not errors:
        print(f"docker-compose.yml: OK ({len(services)} services: {', '.join(services)})")
    return 1 if errors else 0


def native_stack_differences(services: dict) -> list[str]:
    """What the containers would run differently from scripts/stack.sh's processes."""
    errors = []
    prometheus_yml = yaml.safe_load((ROOT / "collector" / "prometheus.yml").read_text())
    mounted = {v.split(":")[1] for v in services["prometheus"].get("volumes", [])}
    for rule_file in prometheus_yml.get("rule_files", []):
        if f"/etc/prometheus/{rule_file}" not in mounted:
            errors.append(f"prometheus: rule file {rule_file} of collector/prometheus.yml is not mounted "
                          f"at /etc/prometheus/{rule_file}")
    stack_sh = (ROOT / "scripts" / "stack.sh").read_text()
    native_args = re.search(r"^OTELCOL_FEATURE_GATES=\((.*)\)", stack_sh, re.M).group(1).split()
    native_gates = {arg.split("=", 1)[1] for arg in native_args}
    compose_gates = {arg.split("=", 1)[1] for arg in services["otel-collector"].get("command", [])
                     if arg.startswith("--feature-gates=")}
    if native_gates != compose_gates:
        errors.append(f"otel-collector: feature gates {sorted(compose_gates)} differ from scripts/stack.sh's "
                      f"OTELCOL_FEATURE_GATES {sorted(native_gates)}")
    return errors


if __name__ == "__main__":
    sys.exit(main())

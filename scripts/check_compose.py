#!/usr/bin/env python3
"""Static checks of docker-compose.yml for machines without Docker (`make compose-check`).

It cannot start the containers; it checks what can go wrong silently:
the file parses, every image is pinned, every bind-mounted file exists, every
published port is on 127.0.0.1, named volumes are declared, and network_mode /
depends_on name real services (service_healthy only on services with a healthcheck).
Needs PyYAML.
"""

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

    for error in errors:
        print(f"docker-compose.yml: {error}", file=sys.stderr)
    if not errors:
        print(f"docker-compose.yml: OK ({len(services)} services: {', '.join(services)})")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

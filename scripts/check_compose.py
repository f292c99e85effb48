#!/usr/bin/env python3
"""Static checks of docker-compose.yml for machines without Docker (`make compose-check`).

It cannot start the containers; it checks what can go wrong silently:
the file parses, every image is pinned, every bind-mounted file exists, every
published port is on 127.0.0.1, named volumes are declared, network_mode /
depends_on name real services (service_healthy only on services with a healthcheck), and
what the native stack gives its services besides the shared config files is given here
too: Prometheus' rule files, the collector's feature gates (scripts/stack.sh); and
collector/jaeger.yaml's Jaeger settings are ones the release compose runs knows.
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
    errors += jaeger_config_errors(services)
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


# --- collector/jaeger.yaml against the Jaeger release compose runs ---------------------------
# Without an engine the Jaeger binary cannot load the file, so its own components' keys are
# checked against the configuration structs of that release: each key below is a
# `mapstructure` tag in jaegertracing/jaeger at tag v2.20.0 (files named beside them). A key
# that release does not know would make the container exit at start ("has invalid keys").
# ANY: a block of OpenTelemetry Collector settings (confighttp, configgrpc, ...), not checked here.
JAEGER_SCHEMA_VERSION = "2.20.0"
ANY = None
_BADGER = {  # internal/storage/v1/badger/config.go
    "ttl": {"spans": ANY}, "directories": {"keys": ANY, "values": ANY}, "ephemeral": ANY, "consistency": ANY,
    "maintenance_interval": ANY, "metrics_update_interval": ANY, "read_only": ANY,
}
_PROMETHEUS = {  # internal/config/promcfg/config.go (squashed), cmd/internal/storageconfig/config.go
    "endpoint": ANY, "connect_timeout": ANY, "tls": ANY, "token_file_path": ANY,
    "token_override_from_context": ANY, "metric_namespace": ANY, "latency_unit": ANY, "normalize_calls": ANY,
    "normalize_duration": ANY, "extra_query_parameters": ANY, "auth": ANY,
}
_TRACE_BACKEND = {"memory": ANY, "badger": _BADGER, "grpc": ANY, "cassandra": ANY, "elasticsearch": ANY,
                  "opensearch": ANY, "clickhouse": ANY}  # cmd/internal/storageconfig/config.go
_METRIC_BACKEND = {"prometheus": _PROMETHEUS, "elasticsearch": ANY, "opensearch": ANY, "clickhouse": ANY}
JAEGER_COMPONENTS = {
    ("extensions", "jaeger_query"): {  # cmd/jaeger/internal/extension/jaegerquery/{config,internal/flags}.go
        "storage": {"traces": ANY, "traces_archive": ANY, "metrics": ANY},
        "base_path": ANY, "ui": {"config_file": ANY, "assets_path": ANY, "log_access": ANY},
        "bearer_token_propagation": ANY, "header_forwarding": ANY, "multi_tenancy": ANY,
        "max_clock_skew_adjust": ANY, "max_trace_size": ANY, "enable_tracing": ANY, "http": ANY, "grpc": ANY,
        "ai": {"agent_url": ANY, "enable_mcp": ANY, "max_request_body_size": ANY, "health_check_interval": ANY,
               "health_check_timeout": ANY},
        "otlp_proxy": {"target": ANY},
    },
    ("extensions", "jaeger_storage"): {"backends": ("map", _TRACE_BACKEND),
                                       "metric_backends": ("map", _METRIC_BACKEND)},
    ("exporters", "jaeger_storage_exporter"): {  # cmd/jaeger/internal/exporters/storageexporter/config.go
        "trace_storage": ANY, "queue": ANY, "retry_on_failure": ANY},
}


def _unknown_keys(value, schema, where: str) -> list[str]:
    if schema is ANY or value is None:
        return []
    if isinstance(schema, tuple):  # ("map", entry schema): user-chosen names, each an entry
        return [e for name, entry in value.items() for e in _unknown_keys(entry, schema[1], f"{where}.{name}")]
    if not isinstance(value, dict):
        return [f"{where} should be a mapping"]
    errors = [f"{where}.{key} is not a setting of Jaeger {JAEGER_SCHEMA_VERSION}" for key in value if key not in schema]
    return errors + [e for key, sub in value.items() if key in schema for e in _unknown_keys(sub, schema[key],
                                                                                             f"{where}.{key}")]


def jaeger_config_errors(services: dict) -> list[str]:
    """collector/jaeger.yaml's Jaeger components against the release the jaeger service runs."""
    image = services["jaeger"]["image"]
    if image != f"jaegertracing/jaeger:{JAEGER_SCHEMA_VERSION}":
        return [f"jaeger: image {image} is not the release whose settings this script knows "
                f"({JAEGER_SCHEMA_VERSION}): check collector/jaeger.yaml against it and update JAEGER_COMPONENTS"]
    config = yaml.safe_load((ROOT / "collector" / "jaeger.yaml").read_text())
    errors = []
    for (kind, name), schema in JAEGER_COMPONENTS.items():
        errors += _unknown_keys((config.get(kind) or {}).get(name), schema, f"collector/jaeger.yaml: {kind}.{name}")
    return errors


if __name__ == "__main__":
    sys.exit(main())

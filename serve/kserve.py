"""KServe manifests for a model repository in object storage: an InferenceService on KServe's Triton runtime
(`storageUri` = the repository), the Secret and ServiceAccount KServe's storage initializer reads S3 credentials
from, and a startup probe sized from the model's measured load time.

Credentials are never written: the Secret holds placeholders for the operator (or their secret manager) to fill.
The same settings map onto Triton's Helm chart (docs/fleet.md): `image.modelRepositoryPath` = the s3:// location,
the AWS variables from the same Secret, `--model-control-mode=explicit --load-model=NAME` as server arguments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from modelship.contract.json_object import JsonObject
from modelship.contract.opsets import runtime_target
from modelship.serve.object_store import S3Location

PROBE_PERIOD_S = 5
PROBE_MARGIN = 3.0  # a cluster node may load slower than this machine: allow three times the measured time
PLACEHOLDER = "<set me>"


@dataclass(frozen=True)
class KServeSpec:
    name: str  # the InferenceService name (a DNS label)
    model: str  # the Triton model to load
    location: S3Location
    load_seconds: float  # measured: server start to model ready
    gpus: int = 0

    @property
    def failure_threshold(self) -> int:
        return max(6, math.ceil(self.load_seconds * PROBE_MARGIN / PROBE_PERIOD_S) + 2)


def manifests(spec: KServeSpec) -> list[JsonObject]:
    """Secret, ServiceAccount and InferenceService, as the documents of one YAML stream."""
    account = f"{spec.name}-s3"
    annotations = {"serving.kserve.io/s3-usehttps": "1"}
    if spec.location.endpoint:
        scheme, host = spec.location.endpoint.split("://", 1)
        annotations = {
            "serving.kserve.io/s3-endpoint": host,
            "serving.kserve.io/s3-usehttps": str(int(scheme == "https")),
        }
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": account, "annotations": annotations},
        "type": "Opaque",
        "stringData": {"AWS_ACCESS_KEY_ID": PLACEHOLDER, "AWS_SECRET_ACCESS_KEY": PLACEHOLDER},
    }
    service_account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": account},
        "secrets": [{"name": account}],
    }
    resources: JsonObject = {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "8Gi"}}
    if spec.gpus:
        resources["limits"]["nvidia.com/gpu"] = str(spec.gpus)
    storage = f"s3://{spec.location.bucket}" + (f"/{spec.location.prefix}" if spec.location.prefix else "")
    service = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": spec.name},
        "spec": {
            "predictor": {
                "serviceAccountName": account,
                "triton": {
                    "storageUri": storage,
                    "runtimeVersion": runtime_target().image.rsplit(":", 1)[-1],
                    "args": ["--model-control-mode=explicit", f"--load-model={spec.model}", "--strict-readiness=true"],
                    "resources": resources,
                    "startupProbe": {
                        "httpGet": {"path": f"/v2/models/{spec.model}/ready", "port": 8000},
                        "periodSeconds": PROBE_PERIOD_S,
                        "failureThreshold": spec.failure_threshold,
                    },
                },
            }
        },
    }
    return [secret, service_account, service]


def to_yaml(documents: list[JsonObject]) -> str:
    import yaml

    return yaml.safe_dump_all(documents, sort_keys=False)

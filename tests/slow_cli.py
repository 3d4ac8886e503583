"""The modelship CLI with slowed file steps, so tests can kill or race a publisher at chosen points.

    python tests/slow_cli.py publish EXPORT --repo REPO      # same arguments as `modelship`

SLOW_COPY_S: seconds to wait after each artifact is staged (copied and verified), holding the lock.
SLOW_RENAME_S: seconds to wait before each rename into the repository (kills land between two of them).
SLOW_PUT_S: seconds to wait before each object written to S3-compatible storage (the same, for s3:// repositories).
"""

from __future__ import annotations

import os
import time


def main() -> None:
    import modelship.contract.staging
    import modelship.serve.publish
    import modelship.serve.s3_publish

    copy_delay = float(os.environ.get("SLOW_COPY_S", "0"))
    rename_delay = float(os.environ.get("SLOW_RENAME_S", "0"))
    put_delay = float(os.environ.get("SLOW_PUT_S", "0"))
    copy, apply = modelship.serve.publish._copy_verified, modelship.contract.staging._apply
    put = modelship.serve.s3_publish._put_verified

    def slow_copy(*args: object) -> None:
        copy(*args)
        time.sleep(copy_delay)

    def slow_apply(change: object) -> None:
        time.sleep(rename_delay)
        apply(change)

    def slow_put(*args: object) -> None:
        time.sleep(put_delay)
        put(*args)

    modelship.serve.publish._copy_verified = slow_copy
    modelship.serve.s3_publish._put_verified = slow_put
    modelship.contract.staging._apply = slow_apply
    from modelship.cli.main import main as cli

    cli()


if __name__ == "__main__":
    main()

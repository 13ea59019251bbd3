"""Every table of the local state database, in one place (docs/design.md "Remote jobs and local state").

Each `Schema` is an append-only list of migrations, applied once each by
`state.apply_schema`; the names are the keys in `schema_versions`, so they never
change. The modules that read and write these tables are named beside each.
Never edit a released step: add a new one.
"""

from __future__ import annotations

from dflash_tui.core.state import Schema

# the eval and cache-build jobs (`evals/jobs/job.py`)
JOBS = Schema(
    "jobs",
    [
        """
        CREATE TABLE jobs (
            id TEXT PRIMARY KEY,
            backend TEXT NOT NULL,
            host TEXT NOT NULL,
            suite TEXT NOT NULL,
            checkpoint TEXT NOT NULL,
            checkpoint_host TEXT NOT NULL,
            checkpoint_path TEXT NOT NULL,
            remote_checkpoint_path TEXT,
            run TEXT,
            step INTEGER,
            gpu TEXT,
            state TEXT NOT NULL,
            detail TEXT,
            progress_done INTEGER,
            progress_total INTEGER,
            remote_dir TEXT,
            pid INTEGER,
            proc_start TEXT,
            command TEXT,
            exit_code INTEGER,
            error TEXT,
            log_tail TEXT,
            owner_pid INTEGER,
            owner_start TEXT,
            created_at REAL NOT NULL,
            started_at REAL,
            finished_at REAL,
            updated_at REAL NOT NULL,
            collected_at REAL,
            result_dir TEXT,
            collect_error TEXT
        );
        CREATE INDEX jobs_by_state ON jobs (state, host)
        """,
        # `dflash-tui eval --sliding`: the harness's --sliding for this job (NULL: the suite's)
        "ALTER TABLE jobs ADD COLUMN sliding TEXT",
        # what the job does: "eval" (the harness) or "cache" (a cache build, docs/evals.md "Building a cache")
        "ALTER TABLE jobs ADD COLUMN kind TEXT NOT NULL DEFAULT 'eval'",
        # a job kind's own settings as JSON (a served bench: engine, k, concurrency, port)
        "ALTER TABLE jobs ADD COLUMN options TEXT",
    ],
)

# the results index (`evals/results/store.py`)
RESULTS = Schema(
    "results",
    [
        """
        CREATE TABLE results (
            id INTEGER PRIMARY KEY,
            suite TEXT NOT NULL,
            checkpoint TEXT NOT NULL,
            job_id TEXT,
            source TEXT NOT NULL,
            origin TEXT,
            sha256 TEXT NOT NULL,
            step INTEGER,
            run TEXT,
            metrics TEXT NOT NULL,
            tasks TEXT NOT NULL,
            n_anchors INTEGER NOT NULL,
            block_size INTEGER NOT NULL,
            device TEXT,
            dir TEXT NOT NULL,
            created_at REAL NOT NULL,
            collected_at REAL NOT NULL,
            UNIQUE (suite, sha256)
        );
        CREATE INDEX results_by_suite ON results (suite, checkpoint, created_at);
        CREATE TABLE baselines (
            suite TEXT PRIMARY KEY,
            checkpoint TEXT NOT NULL,
            set_at REAL NOT NULL
        )
        """,
        # the results file's `attention` object (JSON); NULL: written before it existed
        "ALTER TABLE results ADD COLUMN attention TEXT",
        # the results file's `greedy` object (JSON: how tau_greedy was walked, on which
        # labels); NULL: written before it existed
        "ALTER TABLE results ADD COLUMN greedy TEXT",
        # the results file's `protocol` object (JSON: the cache's protocol block, docs/evals.md
        # "The protocol"); NULL: a cache without one, or written before it existed
        "ALTER TABLE results ADD COLUMN protocol TEXT",
    ],
)

# served-results imports (`evals/results/served/store.py`)
SERVED = Schema(
    "served",
    [
        """
        CREATE TABLE served_imports (
            id INTEGER PRIMARY KEY,
            suite TEXT NOT NULL,
            checkpoint TEXT NOT NULL,
            format TEXT NOT NULL,
            source TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            model TEXT,
            draft TEXT,
            notes TEXT NOT NULL,
            dir TEXT NOT NULL,
            imported_at REAL NOT NULL,
            UNIQUE (suite, sha256)
        );
        CREATE TABLE served_entries (
            id INTEGER PRIMARY KEY,
            import_id INTEGER NOT NULL REFERENCES served_imports (id) ON DELETE CASCADE,
            task TEXT NOT NULL,
            method TEXT NOT NULL,
            tau REAL,
            throughput_tok_s REAL,
            speedup REAL,
            baseline_tok_s REAL,
            settings TEXT NOT NULL,
            details TEXT NOT NULL
        );
        CREATE INDEX served_entries_by_import ON served_entries (import_id)
        """,
    ],
)

# relays, their files and verified ranges (`transfer/ledger.py`)
TRANSFERS = Schema(
    "transfers",
    [
        """
        CREATE TABLE transfers (
            id TEXT PRIMARY KEY,
            src TEXT NOT NULL,
            dst TEXT NOT NULL,
            mode TEXT NOT NULL,
            keep_local TEXT,
            state TEXT NOT NULL,
            range_bytes INTEGER NOT NULL,
            files_total INTEGER NOT NULL DEFAULT 0,
            bytes_total INTEGER NOT NULL DEFAULT 0,
            bytes_done INTEGER NOT NULL DEFAULT 0,
            error TEXT,
            error_kind TEXT,
            resumable INTEGER NOT NULL DEFAULT 0,
            pid INTEGER,
            started_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            finished_at REAL
        );
        CREATE INDEX transfers_by_ends ON transfers (src, dst, state);
        CREATE TABLE transfer_files (
            transfer_id TEXT NOT NULL REFERENCES transfers (id) ON DELETE CASCADE,
            rel TEXT NOT NULL,
            size INTEGER NOT NULL,
            mtime TEXT NOT NULL,
            mode INTEGER NOT NULL,
            state TEXT NOT NULL,
            sha256_src TEXT,
            sha256_dst TEXT,
            PRIMARY KEY (transfer_id, rel)
        );
        CREATE TABLE transfer_ranges (
            transfer_id TEXT NOT NULL,
            rel TEXT NOT NULL,
            offset INTEGER NOT NULL,
            length INTEGER NOT NULL,
            sha256 TEXT,
            PRIMARY KEY (transfer_id, rel, offset),
            FOREIGN KEY (transfer_id, rel) REFERENCES transfer_files (transfer_id, rel)
                ON DELETE CASCADE
        )
        """,
        # How long each host's latest SFTP session took to open (its login shell on a
        # stock host): whether a relay starts its OpenSSH legs before the walk.
        """
        CREATE TABLE host_session_starts (
            host TEXT PRIMARY KEY,
            seconds REAL NOT NULL,
            measured_at REAL NOT NULL
        )
        """,
        # The data path, streams, round trips and per-leg rates of a transfer (JSON of
        # transfer/leg_rates.py LegMeter.summary): which leg was the slow one.
        "ALTER TABLE transfers ADD COLUMN legs TEXT",
        # The round trip last measured to each host: on a long link a relay of a large
        # file starts its streams at once, before the walk measures it again
        # (transfer/hosts/early_streams.py).
        """
        CREATE TABLE host_round_trips (
            host TEXT PRIMARY KEY,
            seconds REAL NOT NULL,
            measured_at REAL NOT NULL
        )
        """,
    ],
)

# S3 multipart uploads in flight (`transfer/s3/state.py`)
STORE_TRANSFERS = Schema(
    "store_uploads",
    [
        """
        CREATE TABLE store_uploads (
            transfer_id TEXT NOT NULL,
            rel TEXT NOT NULL,
            store TEXT NOT NULL,
            bucket TEXT NOT NULL,
            key TEXT NOT NULL,
            upload_id TEXT NOT NULL,
            part_bytes INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            started_at REAL NOT NULL,
            PRIMARY KEY (transfer_id, rel)
        );
        CREATE TABLE store_parts (
            upload_id TEXT NOT NULL,
            part_number INTEGER NOT NULL,
            etag TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            length INTEGER NOT NULL,
            PRIMARY KEY (upload_id, part_number)
        )
        """
    ],
)

# notifications sent, claimed and held back (`notify/store.py`)
NOTIFICATIONS = Schema(
    "notify",
    [
        """
        CREATE TABLE notify_conditions (
            key TEXT PRIMARY KEY,
            active INTEGER NOT NULL,
            value TEXT,
            since REAL NOT NULL,
            updated_at REAL NOT NULL,
            by_pid INTEGER
        );
        CREATE TABLE notify_claims (
            key TEXT PRIMARY KEY,
            claimed_at REAL NOT NULL,
            by_pid INTEGER
        );
        CREATE TABLE notify_sends (
            target TEXT NOT NULL,
            sent_at REAL NOT NULL,
            ok INTEGER NOT NULL,
            event TEXT NOT NULL
        );
        CREATE INDEX notify_sends_target ON notify_sends (target, sent_at);
        CREATE TABLE notify_held (
            target TEXT PRIMARY KEY,
            count INTEGER NOT NULL
        )
        """
    ],
)


ALL = (JOBS, RESULTS, SERVED, TRANSFERS, STORE_TRANSFERS, NOTIFICATIONS)

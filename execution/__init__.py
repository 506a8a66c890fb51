"""Floor 3: running approved plans (engine, worker, gates, reconciler, aftermath) and the run metrics."""

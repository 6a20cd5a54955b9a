// Quiet logs in tests unless asked for.
process.env.LOG_LEVEL ??= 'silent';
// The worker's Prometheus exporter (WORKER_METRICS_PORT, default 9464) off in tests and the
// processes they spawn: test files run side by side and would fight over the port. The metrics
// test gives its worker process a free port of its own.
process.env.WORKER_METRICS_PORT ??= '0';

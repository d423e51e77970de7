"""The CDK stacks of one config (built by `stacks.app_builder`): network, storage, images, accounting, cluster and,
per remote region, network + region. One module per stack or construct; pure helpers (naming, user_data, nag
table) stay free of I/O."""

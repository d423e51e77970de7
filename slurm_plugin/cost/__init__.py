"""The cost report (`elastic-slurm cost`): what each job cost, from sacct, the plugin's event log and the instance
cache's prices. Pure computation over plain data (`when`: time arguments, `sacct`: the one sacct call and its
parsing, `ledger`: which instance ran a node when, `pricing`: a node's hourly price, `report`: job costs and groups,
`render`: table and JSON); docs/cost.md states every rule."""

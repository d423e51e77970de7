"""The parameters a PartitionName line and a NodeName line of slurm.conf take in the pinned release (26.05): the
options its parser reads (src/common/read_config.c, `_partition_options` and `_nodename_options`), which slurm.conf(5)
documents under PARTITION CONFIGURATION and NODE CONFIGURATION (the parser also reads a few old names, e.g. `Shared`).

`clusters[].partitions[].slurm_settings` and `...pools[].slurm_settings` are merged into those lines; a key Slurm does
not know there (e.g. `ResumeProgram`, a slurm.conf parameter) makes slurmctld refuse the whole file, so `validate`
refuses it first (cluster_config/input_checks.py). Compared case-insensitively, as Slurm reads them.
"""

from __future__ import annotations

PARTITION_KEYS = frozenset(
    {
        "AllocNodes",
        "AllowAccounts",
        "AllowGroups",
        "AllowQos",
        "Alternate",
        "CpuBind",
        "DefCpuPerGPU",
        "DefMemPerCPU",
        "DefMemPerGPU",
        "DefMemPerNode",
        "Default",
        "DefaultTime",
        "DenyAccounts",
        "DenyQos",
        "DisableRootJobs",
        "Exclusive",
        "ExclusiveTopo",  # deprecated (Exclusive=TOPO), still read
        "ExclusiveUser",  # deprecated (Exclusive=USER), still read
        "GraceTime",
        "Hidden",
        "LLN",
        "MaxCPUsPerNode",
        "MaxCPUsPerSocket",
        "MaxMemPerCPU",
        "MaxMemPerNode",
        "MaxNodes",
        "MaxTime",
        "MinNodes",
        "Nodes",
        "OverSubscribe",
        "OverTimeLimit",
        "PartitionName",
        "PowerDownOnIdle",
        "PreemptMode",
        "Priority",  # old name of PriorityJobFactor/PriorityTier, still read
        "PriorityJobFactor",
        "PriorityTier",
        "QOS",
        "ReqResv",
        "ResumeTimeout",
        "RootOnly",
        "SelectTypeParameters",
        "Shared",  # old name of OverSubscribe, still read
        "State",
        "SuspendTime",
        "SuspendTimeout",
        "TRESBillingWeights",
        "Topology",
    }
)

NODE_KEYS = frozenset(
    {
        "BcastAddr",
        "Boards",
        "CoreSpecCount",
        "CoresPerSocket",
        "CPUs",
        "CpuBind",
        "CpuSpecList",
        "Feature",
        "Features",
        "Gres",
        "GresConf",
        "MemSpecLimit",
        "NodeAddr",
        "NodeHostname",
        "NodeName",
        "Parameters",
        "Port",
        "Procs",
        "RealMemory",
        "Reason",
        "RestrictedCoresPerGPU",
        "Sockets",
        "SocketsPerBoard",
        "State",
        "SuspendTime",
        "ThreadsPerCore",
        "TmpDisk",
        "Topology",
        "TRESWeights",
        "Weight",
    }
)

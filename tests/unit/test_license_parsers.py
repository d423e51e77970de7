"""FlexLM and RLM status parsers against fixtures that mirror real lmstat/rlmstat output of several versions."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_plugin.licenses import flexlm, rlm
from slurm_plugin.licenses.usage import FeatureUsage, LicenseServerError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def lmstat(name: str) -> str:
    return (FIXTURES / "lmstat" / name).read_text()


def rlmstat(name: str) -> str:
    return (FIXTURES / "rlmstat" / name).read_text()


def test_flexlm_totals_line_gives_issued_and_in_use() -> None:
    usage = flexlm.parse(lmstat("v11_16_eda.txt"))
    assert usage["VCSRuntime_Net"].issued == 50
    assert usage["VCSRuntime_Net"].in_use == 12
    assert usage["Verdi"] == FeatureUsage("Verdi", issued=10, in_use=0)


def test_flexlm_counts_reservations_and_queued_requests_of_a_feature() -> None:
    vcs = flexlm.parse(lmstat("v11_16_eda.txt"))["VCSRuntime_Net"]
    assert vcs.reserved == 2
    assert vcs.queued == 8


def test_flexlm_singular_license_wording_is_parsed() -> None:
    usage = flexlm.parse(lmstat("v11_16_eda.txt"))
    assert usage["Xcelium_Single"].issued == 1
    assert usage["Xcelium_Single"].in_use == 1


def test_flexlm_fully_used_feature_has_nothing_free() -> None:
    formality = flexlm.parse(lmstat("v11_16_eda.txt"))["Formality"]
    assert formality.free == 0
    assert formality.queued == 1


def test_flexlm_expired_feature_reports_zero_issued() -> None:
    assert flexlm.parse(lmstat("v11_16_eda.txt"))["PrimeTime_Legacy"].issued == 0


def test_flexlm_uncounted_feature_is_marked_uncounted() -> None:
    assert flexlm.parse(lmstat("v11_16_eda.txt"))["HSPICE_NodeLocked"].uncounted


def test_flexlm_feature_with_error_totals_is_left_out() -> None:
    assert "Spectre_Old" not in flexlm.parse(lmstat("v11_16_eda.txt"))


def test_flexlm_old_macrovision_output_is_parsed() -> None:
    usage = flexlm.parse(lmstat("v10_8_macrovision.txt"))
    assert usage["msimhdlsim"] == FeatureUsage("msimhdlsim", issued=8, in_use=2)
    assert usage["qhsimvh"].reserved == 1
    assert usage["qhsimvh"].in_use == 1


@pytest.mark.parametrize(
    ("fixture", "reason"),
    [
        ("server_down.txt", "Cannot connect to license server"),
        ("v11_vendor_daemon_down.txt", "vendor daemon is down"),
        ("garbage.txt", "no 'Users of' lines"),
    ],
)
def test_flexlm_server_down_or_garbage_raises_with_the_reason(fixture: str, reason: str) -> None:
    with pytest.raises(LicenseServerError, match=reason):
        flexlm.parse(lmstat(fixture))


def test_flexlm_empty_output_raises() -> None:
    with pytest.raises(LicenseServerError, match="printed nothing"):
        flexlm.parse("")


def test_rlm_pool_counters_give_issued_in_use_and_reservations() -> None:
    usage = rlm.parse(rlmstat("v12_4_foundry.txt"))
    assert usage["nuke_r"] == FeatureUsage("nuke_r", issued=20, in_use=7)
    assert usage["nuke_i"] == FeatureUsage("nuke_i", issued=5, in_use=1, reserved=2)
    assert usage["mari_i"].free == 0


def test_rlm_usage_lines_are_not_mistaken_for_pools() -> None:
    assert set(rlm.parse(rlmstat("v12_4_foundry.txt"))) == {"nuke_r", "nuke_i", "mari_i"}


def test_rlm_pools_of_one_product_are_summed_across_versions() -> None:
    hyperworks = rlm.parse(rlmstat("v15_1_two_pools.txt"))["HyperWorks"]
    assert hyperworks.issued == 50000
    assert hyperworks.in_use == 12500


def test_rlm_products_of_several_isv_servers_are_all_found() -> None:
    usage = rlm.parse(rlmstat("v15_1_two_pools.txt"))
    assert usage["cfd_solver"] == FeatureUsage("cfd_solver", issued=16, in_use=10, reserved=4)
    assert usage["OptiStruct_Node"].uncounted


@pytest.mark.parametrize(("fixture", "reason"), [("server_down.txt", "rlmstat: "), ("garbage.txt", "no license pool")])
def test_rlm_server_down_or_garbage_raises_with_the_reason(fixture: str, reason: str) -> None:
    with pytest.raises(LicenseServerError, match=reason):
        rlm.parse(rlmstat(fixture))


def test_rlm_flexlm_output_is_not_accepted_as_rlm() -> None:
    with pytest.raises(LicenseServerError):
        rlm.parse(lmstat("v11_16_eda.txt"))

"""compare_greedy: a divergence is allowed only at a near-tie, and logprobs must agree before it."""

from ppsched.sglang_patch.greedy_agreement import compare_greedy
from ppsched.sglang_patch.http_client import StreamResult

TOL = 1e-3


def result(req_id, ids, tops):
    return StreamResult(req_id, output_ids=list(ids), top_logprobs=[list(t) for t in tops])


def confident(ids, lp=-0.1):
    """Each chosen token far ahead of a runner-up (token 999)."""
    return [[(tok, lp), (999, lp - 2.0)] for tok in ids]


def test_identical_runs_agree_and_every_token_is_compared():
    ref = [result(0, [5, 6, 7], confident([5, 6, 7])), result(1, [8], confident([8]))]
    oth = [result(0, [5, 6, 7], confident([5, 6, 7], lp=-0.1 + 2e-4)),
           result(1, [8], confident([8]))]
    agreement = compare_greedy(ref, oth, TOL)
    assert agreement.problems == ()
    assert agreement.compared_tokens == 4 and agreement.diverged_at_ties == ()
    assert abs(agreement.max_logprob_diff - 2e-4) < 1e-9


def test_a_divergence_at_a_tie_is_allowed_and_ends_the_comparison_of_that_request():
    tie = [(6, -0.7000), (9, -0.7004)]
    ref = [result(0, [5, 6, 1], [*confident([5]), tie, *confident([1])])]
    oth = [result(0, [5, 9, 2], [*confident([5]), [(9, -0.7001), (6, -0.7003)],
                                 *confident([2])])]
    agreement = compare_greedy(ref, oth, TOL)
    assert agreement.problems == ()
    assert agreement.compared_tokens == 1
    assert [(r, k) for r, k, _ in agreement.diverged_at_ties] == [(0, 1)]


def test_a_divergence_without_a_tie_is_a_problem():
    ref = [result(0, [5, 6], confident([5, 6]))]
    oth = [result(0, [5, 7], [*confident([5]), [(7, -0.1), (6, -0.5)]])]
    agreement = compare_greedy(ref, oth, TOL)
    assert len(agreement.problems) == 1 and "not a tie" in agreement.problems[0]
    # The other token missing from the reference's top list is no tie either.
    oth = [result(0, [5, 3], [*confident([5]), [(3, -0.1), (6, -0.1002)]])]
    assert "not a tie" in compare_greedy(ref, oth, TOL).problems[0]


def test_logprobs_that_disagree_before_any_divergence_are_a_problem():
    ref = [result(0, [5, 6], confident([5, 6]))]
    oth = [result(0, [5, 6], [*confident([5]), *confident([6], lp=-0.2)])]
    agreement = compare_greedy(ref, oth, TOL)
    assert len(agreement.problems) == 1 and "token 1" in agreement.problems[0]


def test_missing_logprobs_lengths_and_requests_are_problems():
    ref = [result(0, [5, 6], confident([5, 6]))]
    assert "missing" in compare_greedy(ref, [result(0, [5, 6], confident([5]))], TOL).problems[0]
    assert "tokens" in compare_greedy(ref, [result(0, [5], confident([5]))], TOL).problems[0]
    assert "different requests" in compare_greedy(ref, [result(1, [5, 6], confident([5, 6]))],
                                                  TOL).problems[0]

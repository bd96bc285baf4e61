"""A model cached across the app's sessions is shared by their threads: a request's settings
(the EM iteration count) must travel with the call, never be written onto the model."""

import threading

import torch

from capsviz.families.matrix_capsnet.config import MatrixCapsConfig
from capsviz.models import build_model


def test_two_threads_routing_one_matrix_model_at_different_iterations_get_their_own_answers():
    torch.manual_seed(0)
    model = build_model(MatrixCapsConfig(in_size=28, A=8, B=4, C=4, D=4, num_classes=10, routing_iterations=2)).eval()
    x = torch.rand(2, 1, 28, 28)
    with torch.no_grad():
        expected = {n: model(x, iterations=n).scores for n in (1, 3)}
    assert not torch.allclose(expected[1], expected[3])  # else the test could not see a mix-up

    barrier = threading.Barrier(2)
    wrong: list[str] = []

    def route(n: int) -> None:
        barrier.wait()
        with torch.no_grad():
            for _ in range(20):  # many calls, so the two threads' forwards interleave
                got = model(x, iterations=n).scores
                if not torch.equal(got, expected[n]):
                    wrong.append(f"{n} iterations gave another answer")
                    return

    threads = [threading.Thread(target=route, args=(n,)) for n in (1, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong, wrong
    assert [m.iterations for m in (model.convcaps1, model.convcaps2, model.classcaps)] == [2, 2, 2]

"""The FPN neck's strided extra-level convs (P6, P7) over levels one pixel wide."""
import pytest

torch = pytest.importorskip("torch", reason="the trainer needs torch (pip install torch torchvision)")

from harness.trainer.fpn import FPN, strided_conv  # noqa: E402

SIDES = [(1, 1), (2, 1), (1, 2), (1, 5), (3, 3)]


def _conv(dilation=1):
    conv = torch.nn.Conv2d(16, 8, 3, stride=2, padding=dilation, dilation=dilation)
    torch.nn.init.normal_(conv.bias)
    return conv


@pytest.mark.parametrize("dilation", [1, 2])
@pytest.mark.parametrize("side", SIDES)
def test_the_strided_conv_is_the_conv_with_the_same_gradients(side, dilation):
    torch.manual_seed(0)
    conv = _conv(dilation)
    x = torch.randn(2, 16, *side, requires_grad=True)
    y = strided_conv(conv, x)
    g = torch.randn(y.shape)
    y.backward(g)
    ref = _conv(dilation)
    ref.load_state_dict(conv.state_dict())
    x_ref = x.detach().clone().requires_grad_()
    y_ref = ref(x_ref)
    y_ref.backward(g)
    assert y.shape == y_ref.shape
    torch.testing.assert_close(y, y_ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(conv.weight.grad, ref.weight.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(conv.bias.grad, ref.bias.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("side", [(1, 1), (2, 1)])
def test_a_bf16_p7_over_a_level_one_pixel_wide_gets_the_fp32_weight_gradient(side):
    # torch's CPU bf16 kernels returned garbage here in most steps; where the CPU has no bf16
    # kernels torch emulates them and the same check runs
    torch.manual_seed(0)
    for _ in range(10):
        junk = [torch.randn(1 << 16) * 1e30 for _ in range(4)]   # leave large values in freed memory
        del junk
        conv = torch.nn.Conv2d(256, 256, 3, stride=2, padding=1).to(memory_format=torch.channels_last)
        x = torch.relu(torch.randn(2, 256, *side)).contiguous(memory_format=torch.channels_last)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = strided_conv(conv, x)
        g = torch.randn(y.shape).to(torch.bfloat16)
        y.backward(g)
        ref = torch.nn.Conv2d(256, 256, 3, stride=2, padding=1)
        ref.load_state_dict(conv.state_dict())
        ref(x.contiguous()).backward(g.float())
        err = (conv.weight.grad - ref.weight.grad).abs().max() / ref.weight.grad.abs().max()
        assert err < 0.05


def test_the_retinanet_neck_takes_p6_and_p7_through_the_strided_conv(monkeypatch):
    import harness.trainer.fpn as fpn

    seen = []
    real = fpn.strided_conv
    monkeypatch.setattr(fpn, "strided_conv", lambda conv, x: seen.append(tuple(x.shape[-2:])) or real(conv, x))
    neck = FPN(in_channels=[8, 16], out_channels=8, extra="p6p7")
    outs = neck([torch.randn(1, 8, 4, 2), torch.randn(1, 16, 2, 1)])
    assert seen == [(2, 1), (1, 1)]
    assert [tuple(o.shape[-2:]) for o in outs] == [(4, 2), (2, 1), (1, 1), (1, 1)]

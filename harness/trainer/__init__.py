"""The bundled SimpleDet-style PyTorch trainer (RetinaNet, Faster R-CNN, Mask R-CNN; R50-FPN).

The harness never imports this package: it launches

    python -m harness.trainer.train CONFIG [--set key=value ...]

as a workload and reads the DETBENCH_META / DETBENCH_ITER lines it prints (harness.jsonlog).
This is the only place in the project that imports torch. Importing the package itself
pulls in nothing heavy.

Pipeline: backbone (backbone.ResNet) -> neck (fpn.FPN) -> rpn.RPN -> roi.MultiLevelRoIAlign
-> rcnn.TwoFCHead (-> rcnn.MaskHead), or backbone -> FPN -> retina.RetinaHead. Configs in
configs/ build typed settings (config.py) and assemble the detector from these classes.
"""

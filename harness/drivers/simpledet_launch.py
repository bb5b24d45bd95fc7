"""Starts MXNet SimpleDet's detection_train.py on a config detbench derived for the trial.

    python simpledet_launch.py --trial-dir DIR --config NAME.py [--simpledet /opt/simpledet]

detection_train.py imports its --config as a module (path with "/" turned into ".") and
reads data/cache/*.roidb, pretrain_model/ and writes experiments/ relative to the folder it
runs in. So this starts it in DIR/simpledet (data and pretrain_model linked from the
checkout's), with DIR, where the derived config lies, first on the module path.
Standard library only: it runs in SimpleDet's own old Python.
"""
import argparse
import os
import runpy
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(prog="simpledet_launch.py")
    parser.add_argument("--trial-dir", required=True)
    parser.add_argument("--config", required=True, help="a file in the trial folder")
    parser.add_argument("--simpledet", default="/opt/simpledet", help="SimpleDet's checkout")
    args = parser.parse_args(argv)
    trial = os.path.abspath(args.trial_dir)
    config = os.path.join(trial, args.config)
    if os.path.dirname(args.config) or not args.config.endswith(".py") or not os.path.isfile(config):
        sys.exit("simpledet_launch.py: %s: no derived config of that name in the trial folder" % config)
    work = os.path.join(trial, "simpledet")
    if not os.path.isdir(work):
        os.makedirs(work)
    for name in ("data", "pretrain_model"):
        source, link = os.path.join(args.simpledet, name), os.path.join(work, name)
        if os.path.exists(source) and not os.path.lexists(link):
            os.symlink(source, link)
    os.chdir(work)
    script = os.path.join(args.simpledet, "detection_train.py")
    sys.path[:0] = [trial, args.simpledet]
    sys.argv = [script, "--config", args.config]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()

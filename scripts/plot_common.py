"""What the plot_*.py scripts share: the output folder from the command line and a pyplot that
draws without a display (Debian: apt-get install python3-matplotlib)."""
import sys


def out_dir_and_pyplot(script):
    """The DIR argument of `script DIR` and matplotlib.pyplot on the Agg backend; exits with a
    message when the argument or matplotlib is missing."""
    if len(sys.argv) != 2:
        sys.exit(f"usage: {script} DIR")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit(f"{script} needs matplotlib: apt-get install python3-matplotlib")
    return sys.argv[1], plt

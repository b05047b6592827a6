"""What only the command line, the benchmark, the scripts and the tests use:
doctor, starting an MPI job from Python (launching.py), a rank's start over
MPI or gloo (backends.py), the standalone loader and the bench. A user's
program never imports this folder."""

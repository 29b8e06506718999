# Sourced by the scripts that run recon on a GPU machine: NVRTC and cuFFT
# on LD_LIBRARY_PATH, the CUDA toolkit's, else the Python wheels'.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib \
         /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib; do
    [ -d "$d" ] && LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
export LD_LIBRARY_PATH

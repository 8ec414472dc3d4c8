#!/usr/bin/env bash
# Prepare Ray for the GPU machine (it has no package registry and a run carries at most 64 MiB): download
# the cp312 wheels of Ray and its dependencies, split them into .gpu/r1 and .gpu/r2, each with a stage.sh;
# carrying both (r1 first) installs them into /opt/ray there. Run from the repo root (about 20 s).
set -euo pipefail
VERSION=${RAY_VERSION:-2.60.0}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download -q "ray==$VERSION" --python-version 3.12 --only-binary=:all: \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 -d "$work/wheels"
(cd "$work/wheels" && tar cf "$work/ray-wheels.tar" ./*.whl)
sha=$(sha256sum "$work/ray-wheels.tar" | cut -d' ' -f1)
size=$(stat -c %s "$work/ray-wheels.tar")
split -b $(( (size + 1) / 2 + 1 )) -d -a 1 "$work/ray-wheels.tar" "$work/part."
for k in 1 2; do
  mkdir -p ".gpu/r$k"
  mv "$work/part.$((k - 1))" ".gpu/r$k/part"
  cat > ".gpu/r$k/stage.sh" <<EOF
#!/usr/bin/env bash
# Stage Ray part $k of 2 on the GPU machine; the second installs Ray and its dependencies into /opt/ray.
set -eu
here=\$(cd "\$(dirname "\$0")" && pwd)
mkdir -p /opt/ray-parts
cp "\$here/part" /opt/ray-parts/part.$k
if [ "\$(ls /opt/ray-parts | wc -l)" -lt 2 ]; then echo "staged ray part $k of 2"; exit 0; fi
cat /opt/ray-parts/part.1 /opt/ray-parts/part.2 > /opt/ray-wheels.tar
echo "$sha  /opt/ray-wheels.tar" | sha256sum -c --quiet
rm -rf /opt/ray /opt/ray-whl && mkdir -p /opt/ray /opt/ray-whl && tar xf /opt/ray-wheels.tar -C /opt/ray-whl
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /opt/ray /opt/ray-whl/*.whl
rm -rf /opt/ray-whl /opt/ray-wheels.tar /opt/ray-parts
echo "ray installed: add /opt/ray to PYTHONPATH (and /opt/ray/bin to PATH)"
EOF
done
ls -la .gpu/r1 .gpu/r2

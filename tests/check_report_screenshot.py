#!/usr/bin/python3
"""check_report_screenshot.py PNG [--colour RRGGBB ...] — checks that a headless Chromium
screenshot of a `cpparity report` page shows a rendered page, not a blank or half-drawn one:

  * the image is not of one colour, and has at least MINIMUM_COLOURS distinct colours;
  * at least MINIMUM_INK of its pixels are not the page's white background;
  * every --colour given appears on at least MINIMUM_PIXELS pixels (the report's first plot
    colour, the FAIL chip's colour: proof that a plot and the grid were painted on screen).

The PNG is decoded here (zlib and numpy; the system Python has no PIL): 8-bit RGB or RGBA,
not interlaced, which is what Chromium writes. Exit 0 when every check holds, 1 otherwise.
"""
import struct
import sys
import zlib

import numpy as np

# A rendered report shows thousands of colours (about 7,500 for cases/ci.yaml: chips, plots,
# anti-aliasing); a blank page has one, a page of plain black text about 30.
MINIMUM_COLOURS = 64
# The header, the grid and the plots cover far more than 2% of a 1400 x 3000 screenshot; a page
# that stopped after its title covers less than 1%.
MINIMUM_INK = 0.02
# A plot's line or a chip covers hundreds of pixels; anti-aliasing can reproduce any colour on a
# few stray pixels, so a colour counts only from 50 exact pixels on.
MINIMUM_PIXELS = 50


def decode(path):
    """The PNG's pixels as an array [height, width, channels]."""
    data = open(path, 'rb').read()
    if data[:8] != b'\x89PNG\r\n\x1a\n':
        raise ValueError('%s is not a PNG file' % path)
    position, chunks, header = 8, [], None
    while position < len(data):
        length, kind = struct.unpack('>I4s', data[position:position + 8])
        body = data[position + 8:position + 8 + length]
        if kind == b'IHDR':
            header = struct.unpack('>IIBBBBB', body)
        elif kind == b'IDAT':
            chunks.append(body)
        elif kind == b'IEND':
            break
        position += 12 + length
    width, height, depth, colour_type, _, _, interlace = header
    if depth != 8 or interlace != 0 or colour_type not in (2, 6):
        raise ValueError('%s: only 8-bit RGB/RGBA non-interlaced PNG is read here' % path)
    channels = 3 if colour_type == 2 else 4
    rows = np.frombuffer(zlib.decompress(b''.join(chunks)), dtype=np.uint8)
    rows = rows.reshape(height, width * channels + 1)
    filters = rows[:, 0]
    raw = rows[:, 1:].reshape(height, width, channels).astype(np.int16)
    # Undo the filters along anti-diagonals: pixel (y, x) needs (y, x-1), (y-1, x), (y-1, x-1),
    # all on earlier diagonals, so each diagonal is one vector operation.
    image = np.zeros((height + 1, width + 1, channels), dtype=np.int16)
    for diagonal in range(height + width - 1):
        ys = np.arange(max(0, diagonal - width + 1), min(height, diagonal + 1))
        xs = diagonal - ys
        left, up, up_left = image[ys + 1, xs], image[ys, xs + 1], image[ys, xs]
        kind = filters[ys][:, None]
        estimate = left + up - up_left
        d_left, d_up, d_corner = (np.abs(estimate - left), np.abs(estimate - up),
                                  np.abs(estimate - up_left))
        paeth = np.where((d_left <= d_up) & (d_left <= d_corner), left,
                         np.where(d_up <= d_corner, up, up_left))
        predictor = np.select([kind == 1, kind == 2, kind == 3, kind == 4],
                              [left, up, (left + up) >> 1, paeth], 0)
        image[ys + 1, xs + 1] = (raw[ys, xs] + predictor) & 255
    return image[1:, 1:, :3].astype(np.uint8)


def main(arguments):
    path, wanted = arguments[0], []
    rest = arguments[1:]
    while rest:
        if rest[0] != '--colour' or len(rest) < 2:
            print('usage: check_report_screenshot.py PNG [--colour RRGGBB ...]')
            return 2
        wanted.append(rest[1])
        rest = rest[2:]
    image = decode(path)
    pixels = image.reshape(-1, 3)
    packed = (pixels[:, 0].astype(np.int64) << 16) | (pixels[:, 1].astype(np.int64) << 8) | pixels[:, 2]
    colours, counts = np.unique(packed, return_counts=True)
    ink = float(np.mean(packed != 0xFFFFFF))
    failures = []
    if len(colours) < MINIMUM_COLOURS:
        failures.append('only %d distinct colours (a blank page has 1; expected >= %d)'
                        % (len(colours), MINIMUM_COLOURS))
    if ink < MINIMUM_INK:
        failures.append('only %.2f%% of the pixels are not white (expected >= %.0f%%)'
                        % (100 * ink, 100 * MINIMUM_INK))
    for colour in wanted:
        value = int(colour, 16)
        found = int(counts[colours == value].sum())
        if found < MINIMUM_PIXELS:
            failures.append('colour #%s on %d pixels (expected >= %d)' % (colour, found, MINIMUM_PIXELS))
    print('%s: %dx%d, %d colours, %.1f%% not white%s' % (
        path, image.shape[1], image.shape[0], len(colours), 100 * ink,
        ''.join(', #%s present' % c for c in wanted)))
    for failure in failures:
        print('FAIL: ' + failure)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))

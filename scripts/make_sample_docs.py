#!/usr/bin/env python3
"""Generate the binary files of the bundled sample knowledge bases.

    python scripts/make_sample_docs.py            # regenerate, then verify
    python scripts/make_sample_docs.py --verify   # only verify what is on disk

The Markdown, text and HTML documents under ``data/kbs/<kb>/`` are written by hand and
are the sources of truth for those formats.  This script produces everything binary:

* the PNG images those Markdown/HTML files reference (``data/kbs/<kb>/images/*.png``),
* the DOCX documents (python-docx: Heading 1/2/3, List Number / List Bullet, tables,
  inline pictures),
* the PDF documents (reportlab platypus).  The two Chinese PDFs use two kinds of font on
  purpose: ``03-db-connection-pool.pdf`` uses reportlab's built-in, *non-embedded* CID
  font ``STSong-Light`` (text extracts fine with pdfminer.six, but renderers without Asian
  fonts, e.g. pdfium on a bare Linux box, draw nothing); the post-mortem PDF embeds a
  subset of a CJK TrueType font (WenQuanYi Micro Hei, Debian package
  ``fonts-wqy-microhei``), so it also renders everywhere.  Without that font installed
  the script falls back to STSong-Light for it and says so.

The text of the DOCX and PDF documents is held below in a tiny Markdown-like markup
(``#`` headings, ``1.`` and ``-`` lists, ``|`` tables, fenced code, ``[[img:key|caption]]``).
Output is deterministic: fixed metadata dates, fixed ZIP timestamps, ``invariant`` PDFs.
Needs: python-docx, reportlab, pillow, pdfminer.six.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import math
import re
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from PIL import Image, ImageDraw, ImageFont

ROOT = Path(__file__).resolve().parents[1] / "data" / "kbs"
ZH = "ops-runbook-zh"
EN = "product-manual-en"
FIXED_DATE = dt.datetime(2024, 9, 20, 9, 0, 0)
ZIP_DATE = (2024, 9, 20, 9, 0, 0)
MAX_PNG_BYTES = 60_000


# ---------------------------------------------------------------------------------------
# Pillow drawing helpers
# ---------------------------------------------------------------------------------------

_FONT_FILES = {
    (False, False): ["DejaVuSans.ttf", "LiberationSans-Regular.ttf", "Arial.ttf"],
    (True, False): ["DejaVuSans-Bold.ttf", "LiberationSans-Bold.ttf", "Arial Bold.ttf"],
    (False, True): ["DejaVuSansMono.ttf", "LiberationMono-Regular.ttf", "Courier New.ttf"],
    (True, True): ["DejaVuSansMono-Bold.ttf", "LiberationMono-Bold.ttf", "Courier New Bold.ttf"],
}
_FONT_DIRS = [
    "",
    "/usr/share/fonts/truetype/dejavu/",
    "/usr/share/fonts/truetype/liberation/",
    "/usr/share/fonts/TTF/",
    "/Library/Fonts/",
    "C:/Windows/Fonts/",
]
_font_cache: dict = {}


def font(size: int, bold: bool = False, mono: bool = False):
    key = (size, bold, mono)
    if key not in _font_cache:
        f = None
        for name in _FONT_FILES[(bold, mono)]:
            for d in _FONT_DIRS:
                try:
                    f = ImageFont.truetype(d + name, size)
                    break
                except OSError:
                    continue
            if f:
                break
        _font_cache[key] = f or ImageFont.load_default(size=size)
    return _font_cache[key]


def new_canvas(w: int, h: int, bg: str = "white"):
    img = Image.new("RGB", (w, h), bg)
    return img, ImageDraw.Draw(img)


def box(d, xy, text, fill="#e8f0fe", outline="#3c5a99", size=15, bold=False, color="#111111", radius=8, width=2):
    d.rounded_rectangle(xy, radius=radius, fill=fill, outline=outline, width=width)
    cx, cy = (xy[0] + xy[2]) / 2, (xy[1] + xy[3]) / 2
    d.multiline_text((cx, cy), text, font=font(size, bold), fill=color, anchor="mm", align="center", spacing=4)


def arrow(
    d, p0, p1, color="#333333", width=3, head=11, label=None, label_size=13, label_offset=(0, -12), label_color=None
):
    d.line([p0, p1], fill=color, width=width)
    ang = math.atan2(p1[1] - p0[1], p1[0] - p0[0])
    left = (p1[0] - head * math.cos(ang - 0.45), p1[1] - head * math.sin(ang - 0.45))
    right = (p1[0] - head * math.cos(ang + 0.45), p1[1] - head * math.sin(ang + 0.45))
    d.polygon([p1, left, right], fill=color)
    if label:
        mx = (p0[0] + p1[0]) / 2 + label_offset[0]
        my = (p0[1] + p1[1]) / 2 + label_offset[1]
        d.text((mx, my), label, font=font(label_size), fill=label_color or color, anchor="mm")


def poly_arrow(d, points, color="#333333", width=3, label=None, label_at=None, label_size=13):
    d.line(points[:-1], fill=color, width=width, joint="curve")
    arrow(d, points[-2], points[-1], color=color, width=width)
    if label and label_at:
        d.text(label_at, label, font=font(label_size), fill=color, anchor="mm")


def draw_table(
    d,
    x,
    y,
    col_widths,
    rows,
    row_h=34,
    size=14,
    header_fill="#2f4b7c",
    header_color="white",
    fills=None,
    grid="#888888",
):
    """Draw a grid table; rows[0] is the header.  fills: per-row background colors."""
    for r, row in enumerate(rows):
        cx = x
        top = y + r * row_h
        for c, cell in enumerate(row):
            w = col_widths[c]
            if r == 0:
                bg, fg, f = header_fill, header_color, font(size, bold=True)
            else:
                bg = fills[r - 1] if fills else ("#ffffff" if r % 2 else "#f2f4f8")
                fg, f = "#111111", font(size, bold=(c == 0))
            d.rectangle([cx, top, cx + w, top + row_h], fill=bg, outline=grid, width=1)
            d.text((cx + 8, top + row_h / 2), cell, font=f, fill=fg, anchor="lm")
            cx += w
    return y + len(rows) * row_h


def png_bytes(img: Image.Image, colors: int = 96) -> bytes:
    """Palette-quantize (small files, deterministic) and encode as PNG."""
    q = img.quantize(colors=colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    buf = io.BytesIO()
    q.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def line_chart(w, h, title, xs_labels, series, y_max, y_step, y_label, thresholds=(), annotations=()):
    """series: list of (name, color, values); thresholds: (value, label, color)."""
    img, d = new_canvas(w, h)
    left, right, top, bottom = 70, w - 30, 56, h - 60
    d.text((w / 2, 22), title, font=font(17, bold=True), fill="#111111", anchor="mm")
    # grid and y axis
    v = 0
    while v <= y_max:
        yy = bottom - (bottom - top) * v / y_max
        d.line([(left, yy), (right, yy)], fill="#e3e3e3", width=1)
        d.text((left - 8, yy), f"{v:g}", font=font(12), fill="#444444", anchor="rm")
        v += y_step
    d.line([(left, top), (left, bottom), (right, bottom)], fill="#333333", width=2)
    d.text((18, (top + bottom) / 2), y_label, font=font(12), fill="#444444", anchor="mm")
    n = max(len(s[2]) for s in series)

    def px(i):
        return left + (right - left) * i / (n - 1)

    def py(val):
        return bottom - (bottom - top) * val / y_max

    step = max(1, (n - 1) // (len(xs_labels) - 1))
    for k, lab in enumerate(xs_labels):
        i = min(k * step, n - 1)
        d.line([(px(i), bottom), (px(i), bottom + 5)], fill="#333333", width=1)
        d.text((px(i), bottom + 16), lab, font=font(12), fill="#444444", anchor="mm")
    for val, lab, color in thresholds:
        yy = py(val)
        for xx in range(left, right, 14):
            d.line([(xx, yy), (min(xx + 7, right), yy)], fill=color, width=2)
        d.text((right - 4, yy - 10), lab, font=font(12, bold=True), fill=color, anchor="rm")
    legend_x = left + 10
    for name, color, values in series:
        pts = [(px(i), py(v)) for i, v in enumerate(values)]
        d.line(pts, fill=color, width=3, joint="curve")
        d.rectangle([legend_x, h - 24, legend_x + 16, h - 14], fill=color)
        d.text((legend_x + 22, h - 19), name, font=font(12), fill="#222222", anchor="lm")
        legend_x += 30 + d.textlength(name, font=font(12))
    for i, val, text in annotations:
        x0, y0 = px(i), py(val)
        d.ellipse([x0 - 5, y0 - 5, x0 + 5, y0 + 5], outline="#c0392b", width=2)
        d.text((x0 + 10, y0 - 14), text, font=font(12, bold=True), fill="#c0392b", anchor="lm")
    return img


# ---------------------------------------------------------------------------------------
# The images
# ---------------------------------------------------------------------------------------


def img_cpu_triage_flow() -> Image.Image:
    img, d = new_canvas(900, 470)
    d.text(
        (450, 24),
        "CPU high-load triage (order-gateway / risk-engine / settlement-service)",
        font=font(17, bold=True),
        fill="#111111",
        anchor="mm",
    )
    steps = [
        ("Alert: HostCpuHigh\nCPU > 85% for 5 min", "#fde2e1", "#c0392b"),
        ("top  (press P)\nfind the hot PID", "#e8f0fe", "#3c5a99"),
        ("top -Hp <PID>\nhottest 3 threads", "#e8f0fe", "#3c5a99"),
        ("jstack x3, 5 s apart\nmatch nid=0x<TID>", "#e8f0fe", "#3c5a99"),
    ]
    x = 20
    for i, (t, fill, outline) in enumerate(steps):
        box(d, (x, 60, x + 190, 130), t, fill=fill, outline=outline, size=14)
        if i < len(steps) - 1:
            arrow(d, (x + 190, 95), (x + 222, 95))
        x += 222
    # decision
    cx, cy = 450, 215
    d.polygon(
        [(cx, cy - 50), (cx + 120, cy), (cx, cy + 50), (cx - 120, cy)], fill="#fff4d6", outline="#b7950b", width=2
    )
    d.text((cx, cy), "Which cause?", font=font(15, bold=True), fill="#111111", anchor="mm")
    poly_arrow(d, [(786, 130), (786, 160), (cx, 160), (cx, cy - 50)])
    outcomes = [
        ("Busy loop in code\n-> rollback / hotfix", 20),
        ("GC threads busy\n-> memory-leak runbook", 245),
        ("Lock contention\n-> smaller lock scope", 470),
        ("Traffic spike (QPS x3)\n-> scale out + rate limit", 695),
    ]
    for text, ox in outcomes:
        box(d, (ox, 340, ox + 190, 410), text, fill="#e9f7ef", outline="#1e8449", size=14)
        poly_arrow(d, [(cx, cy + 50), (cx, 300), (ox + 95, 300), (ox + 95, 340)], width=2)
    d.text(
        (450, 445),
        "Keep the instance out of traffic (weight 0 in Nacos) and save evidence before restarting.",
        font=font(13),
        fill="#555555",
        anchor="mm",
    )
    return img


def img_top_screenshot() -> Image.Image:
    lines = [
        ("top - 10:41:07 up 41 days,  3:12,  2 users,  load average: 34.12, 31.87, 25.40", "#d0d0d0"),
        ("Tasks: 312 total,   3 running, 309 sleeping,   0 stopped,   0 zombie", "#d0d0d0"),
        ("%Cpu(s): 91.6 us,  4.8 sy,  0.0 ni,  2.9 id,  0.0 wa,  0.0 hi,  0.7 si", "#ff7b72"),
        ("MiB Mem :  64213.4 total,   6120.9 free,  41876.2 used,  16216.3 buff/cache", "#d0d0d0"),
        ("MiB Swap:      0.0 total,      0.0 free,      0.0 used.  21433.0 avail Mem", "#d0d0d0"),
        ("", "#d0d0d0"),
        ("    PID USER      PR  NI    VIRT    RES    SHR S  %CPU  %MEM     TIME+ COMMAND", "#000000"),
        ("  28417 trade     20   0   14.2g   9.1g  31232 S 387.0  14.5   6:42.18 java (risk-engine)", "#ffdf5d"),
        ("  19022 trade     20   0   12.8g   8.4g  29876 S  64.3  13.4 812:10.55 java (order-gateway)", "#d0d0d0"),
        ("   2231 root      20   0    2.1g 412.6m  18044 S  12.0   0.6  95:33.02 filebeat", "#d0d0d0"),
        ("   1187 root      20   0  987.4m 121.3m  40112 S   3.7   0.2 210:47.91 kubelet", "#d0d0d0"),
        ("    941 root      20   0  312.8m  52.4m  11208 S   1.0   0.1  40:02.63 node_exporter", "#d0d0d0"),
        ("     17 root      20   0       0      0      0 S   0.3   0.0   3:14.77 ksoftirqd/1", "#d0d0d0"),
    ]
    img, d = new_canvas(900, 330, "#1e1e1e")
    d.rectangle([0, 0, 900, 28], fill="#3a3a3a")
    for i, c in enumerate(["#ff5f56", "#ffbd2e", "#27c93f"]):
        d.ellipse([12 + i * 20, 8, 24 + i * 20, 20], fill=c)
    d.text((450, 14), "ops@trd-app-07: ~  (ssh)", font=font(13), fill="#dddddd", anchor="mm")
    y = 42
    for text, color in lines:
        if color == "#000000":
            d.rectangle([8, y - 2, 892, y + 17], fill="#d0d0d0")
        d.text((12, y), text, font=font(13, mono=True), fill=color)
        y += 21
    return img


def img_release_pipeline() -> Image.Image:
    img, d = new_canvas(960, 330)
    d.text((480, 22), "Canary release pipeline (deployctl)", font=font(18, bold=True), fill="#111111", anchor="mm")
    stages = [
        ("Build\nimage v2.15.0-318", "#eeeeee", "#666666"),
        ("Staging\n1,200 tests, 100%", "#e8f0fe", "#3c5a99"),
        ("Canary 5%\n1 pod, watch 10 min", "#fff4d6", "#b7950b"),
        ("25%\nwatch 10 min", "#fff4d6", "#b7950b"),
        ("50%\nwatch 10 min", "#fff4d6", "#b7950b"),
        ("100%\nwatch 30 min", "#e9f7ef", "#1e8449"),
    ]
    x = 14
    centers = []
    for i, (t, fill, outline) in enumerate(stages):
        box(d, (x, 70, x + 138, 140), t, fill=fill, outline=outline, size=13)
        centers.append(x + 69)
        if i < len(stages) - 1:
            arrow(d, (x + 138, 105), (x + 162, 105))
        x += 162
    # rollback path
    box(
        d,
        (300, 230, 660, 300),
        "ROLLBACK: deployctl rollback --service <svc>\n--to <previous version> --batch 50%",
        fill="#fde2e1",
        outline="#c0392b",
        size=13,
        color="#7b241c",
    )
    for cx in centers[2:]:
        d.line([(cx, 140), (cx, 190)], fill="#c0392b", width=2)
    d.line([(centers[2], 190), (centers[5], 190)], fill="#c0392b", width=2)
    arrow(d, (480, 190), (480, 230), color="#c0392b", width=2)
    d.multiline_text(
        (20, 232),
        "Roll back if, in any stage:\n- error rate > 0.5% (2 min)\n- P99 latency > 200 ms\n- order success < 99.9%",
        font=font(13, bold=True),
        fill="#c0392b",
        spacing=3,
    )
    d.text(
        (480, 318),
        "Decide within 15 minutes, finish the rollback within 30 minutes.",
        font=font(13),
        fill="#555555",
        anchor="mm",
    )
    return img


def img_alert_levels_table() -> Image.Image:
    img, d = new_canvas(900, 250)
    d.text(
        (450, 22),
        "Alert levels - quick reference (print for the on-call room)",
        font=font(17, bold=True),
        fill="#111111",
        anchor="mm",
    )
    rows = [
        ["Level", "Meaning", "Respond", "Recover", "Notify"],
        ["P0", "Core trading down (orders, matching, quotes)", "5 min", "30 min", "phone+SMS+WeCom+CTO"],
        ["P1", "Core trading degraded (success < 99%)", "15 min", "2 h", "phone + WeCom"],
        ["P2", "Non-core fault or risk (CPU > 85%, disk > 90%)", "30 min", "same day", "WeCom (+phone)"],
        ["P3", "Warning (disk > 80%, cert < 30 days)", "next workday", "1 week", "WeCom group"],
    ]
    fills = ["#fadbd8", "#fdebd0", "#fcf3cf", "#eaf2f8"]
    draw_table(d, 14, 46, [60, 370, 110, 95, 235], rows, row_h=38, size=14, fills=fills)
    return img


def img_platform_architecture() -> Image.Image:
    img, d = new_canvas(980, 520)
    d.text(
        (490, 22), "Xinglan trading platform - architecture (V5)", font=font(18, bold=True), fill="#111111", anchor="mm"
    )
    d.rounded_rectangle((150, 50, 970, 380), radius=12, outline="#9aa5b1", width=2)
    d.text((960, 370), "Kubernetes namespace: trading", font=font(12), fill="#5d6d7e", anchor="rd")
    box(d, (10, 150, 120, 210), "Clients\n(web / app / API)", fill="#f4f6f7", outline="#7f8c8d", size=13)
    box(d, (170, 150, 290, 210), "SLB", fill="#f4f6f7", outline="#7f8c8d", size=14)
    box(d, (330, 140, 480, 220), "order-gateway\n:8080  x8", fill="#e8f0fe", outline="#3c5a99", size=14, bold=True)
    box(d, (540, 140, 690, 220), "risk-engine\n:8090  x6", fill="#e8f0fe", outline="#3c5a99", size=14, bold=True)
    box(
        d,
        (760, 140, 950, 220),
        "matching-engine\n:9100 (C++, bare metal)",
        fill="#fdebd0",
        outline="#b9770e",
        size=13,
        bold=True,
    )
    box(d, (760, 270, 950, 340), "Kafka\ntrade-executions (32 p.)", fill="#f5eef8", outline="#7d3c98", size=13)
    box(d, (500, 270, 690, 340), "settlement-service\n:8085  x4", fill="#e8f0fe", outline="#3c5a99", size=13, bold=True)
    box(d, (330, 270, 480, 340), "account-service\n:8081  x4", fill="#e8f0fe", outline="#3c5a99", size=13)
    box(d, (170, 70, 320, 120), "market-data-feed\n:7001 (Go)", fill="#e9f7ef", outline="#1e8449", size=13)
    box(
        d,
        (370, 410, 620, 480),
        "trade-db  MySQL 8.0\n1 primary + 2 replicas",
        fill="#fef9e7",
        outline="#b7950b",
        size=14,
        bold=True,
    )
    box(d, (10, 60, 130, 130), "quote-cache\nRedis 7\n6 x 16 GB", fill="#fdedec", outline="#c0392b", size=13)
    arrow(d, (120, 180), (170, 180))
    arrow(d, (290, 180), (330, 180))
    arrow(d, (480, 180), (540, 180), label="risk check", label_offset=(0, -52))
    arrow(d, (690, 180), (760, 180), label="order", label_offset=(0, -52))
    arrow(d, (855, 220), (855, 270), label="fills", label_offset=(26, 0))
    arrow(d, (760, 305), (690, 305))
    arrow(d, (245, 120), (245, 150), label="quotes", label_offset=(-30, 0))
    arrow(d, (170, 95), (130, 95), width=2)
    for sx in (405, 595):
        arrow(d, (sx, 340), (sx + (495 - sx) * 0.5, 410), width=2)
    arrow(d, (405, 220), (405, 270), width=2)
    d.text(
        (490, 505),
        "Primary site Zhangjiang, hot standby Jinqiao (2 x 10 Gbps, RTT 0.8 ms)",
        font=font(13),
        fill="#555555",
        anchor="mm",
    )
    return img


def img_port_matrix() -> Image.Image:
    img, d = new_canvas(900, 300)
    d.text((450, 22), "Keelvault 3.4 - network port matrix", font=font(17, bold=True), fill="#111111", anchor="mm")
    rows = [
        ["Port", "Protocol", "From -> To", "Purpose", "Default"],
        ["8443", "TCP/HTTPS", "admins -> appliance", "Web console + REST API", "open"],
        ["7410", "TCP/TLS", "agents -> appliance", "Backup/restore data", "open"],
        ["7411", "TCP/TLS", "agents -> appliance", "Job control, heartbeats 30 s", "open"],
        ["7420", "TCP/TLS", "appliance -> appliance", "Replication", "open"],
        ["9100", "TCP/HTTP", "Prometheus -> appliance", "/metrics", "disabled"],
        ["22", "TCP/SSH", "admins -> appliance", "Shell access", "disabled"],
    ]
    draw_table(d, 14, 46, [80, 120, 240, 300, 130], rows, row_h=35, size=14)
    return img


def img_deployment_topology() -> Image.Image:
    img, d = new_canvas(960, 430)
    d.text((480, 22), "Typical Keelvault deployment", font=font(18, bold=True), fill="#111111", anchor="mm")
    for i, name in enumerate(
        ["web01  (Linux agent)", "db-prod-02  (PostgreSQL)", "fs01  (Windows agent)", "vCenter / Proxmox  (agentless)"]
    ):
        box(d, (14, 60 + i * 78, 244, 116 + i * 78), name, fill="#f4f6f7", outline="#7f8c8d", size=13)
        arrow(d, (244, 88 + i * 78), (370, 205), width=2)
    d.text((300, 110), "7410 data\n7411 control", font=font(12), fill="#333333", anchor="mm")
    box(
        d,
        (370, 160, 590, 250),
        "backup01\nprimary appliance KV-200\nrepository 'default'",
        fill="#e8f0fe",
        outline="#3c5a99",
        size=14,
        bold=True,
    )
    box(d, (700, 60, 940, 130), "dr01  offsite replica\n(second appliance)", fill="#e9f7ef", outline="#1e8449", size=14)
    box(
        d,
        (700, 190, 940, 260),
        "S3 bucket kv-backups\ncloud tier after 30 days",
        fill="#fef9e7",
        outline="#b7950b",
        size=14,
    )
    box(d, (700, 320, 940, 390), "Prometheus\nscrapes /metrics", fill="#f5eef8", outline="#7d3c98", size=14)
    box(d, (370, 330, 590, 400), "Administrators\nbrowser / kvctl", fill="#f4f6f7", outline="#7f8c8d", size=14)
    arrow(d, (590, 180), (700, 100), label="7420 replication", label_offset=(-5, -60))
    arrow(d, (590, 215), (700, 225), label="HTTPS 443", label_offset=(0, -12))
    arrow(d, (700, 345), (590, 235), label="9100", label_offset=(20, -18))
    arrow(d, (480, 330), (480, 250), label="8443", label_offset=(26, 0))
    return img


def img_jobs_page() -> Image.Image:
    img, d = new_canvas(960, 380, "#f7f8fa")
    d.rectangle([0, 0, 960, 44], fill="#1f2d3d")
    d.text((16, 22), "Keelvault", font=font(18, bold=True), fill="white", anchor="lm")
    d.text(
        (140, 22),
        "Dashboard     Monitor > Jobs     Sources     Repositories     Settings",
        font=font(14),
        fill="#c8d3df",
        anchor="lm",
    )
    d.text((944, 22), "admin  |  backup01", font=font(13), fill="#c8d3df", anchor="rm")
    d.text((16, 66), "Job runs - last 24 hours", font=font(16, bold=True), fill="#111111", anchor="lm")
    d.text((944, 66), "Filter: status = any    source = any", font=font(13), fill="#555555", anchor="rm")
    rows = [
        ["Job", "Source", "Started", "Duration", "Read", "Status"],
        ["nightly-linux", "web01", "2024-09-17 01:04", "00:12:41", "48.2 GB", "Succeeded"],
        ["nightly-linux", "web02", "2024-09-17 01:09", "00:11:58", "45.7 GB", "Succeeded"],
        ["db-nightly", "db-prod-01", "2024-09-17 01:13", "00:41:06", "612.0 GB", "Succeeded"],
        ["db-nightly", "db-prod-02", "2024-09-17 01:02", "00:00:14", "0 B", "Failed  KV-E2107"],
        ["fileserver", "fs01", "2024-09-17 02:00", "01:47:30", "2.31 TB", "Warning  14 files skipped"],
        ["vm-weekly", "vcenter01 (38 VMs)", "2024-09-17 02:15", "03:02:11", "9.84 TB", "Succeeded"],
    ]
    fills = ["#ffffff", "#ffffff", "#ffffff", "#fde2e1", "#fff4d6", "#ffffff"]
    draw_table(
        d,
        16,
        90,
        [140, 190, 170, 100, 100, 220],
        rows,
        row_h=36,
        size=13,
        header_fill="#e5e9f0",
        header_color="#111111",
        fills=fills,
        grid="#d0d5dd",
    )
    d.rounded_rectangle((16, 345, 700, 372), radius=4, fill="#fde2e1", outline="#c0392b")
    d.text(
        (26, 358),
        "db-prod-02: KV-E2107 Snapshot chain broken - run 'kvctl snapshot verify'",
        font=font(13, bold=True),
        fill="#922b21",
        anchor="lm",
    )
    return img


def img_heap_chart() -> Image.Image:
    vals = []
    for day in range(6):
        base = 34 + day * 11
        for k in range(8):
            vals.append(min(97, base + k * 2.2 + (k % 2) * 3))
    after_gc = [34 + i * 1.45 for i in range(len(vals))]
    return line_chart(
        820,
        360,
        "order-gateway JVM old gen, 2024-05-06 .. 05-11 (instance og-3)",
        ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat"],
        [("old gen used %", "#3c5a99", vals), ("after Full GC %", "#c0392b", after_gc)],
        100,
        20,
        "%",
        thresholds=[(80, "alert 80%", "#e67e22")],
        annotations=[(len(vals) - 1, after_gc[-1], "OOM risk")],
    )


def img_pool_chart() -> Image.Image:
    # minutes 10:20 .. 10:50
    active, pending = [], []
    for m in range(31):
        if m < 8:
            a, p = 18 + (m % 3) * 2, 0
        elif m < 12:
            a, p = 30 + (m - 8) * 5, (m - 8) * 8
        elif m < 28:
            a, p = 50, min(180, 40 + (m - 12) * 18)
        else:
            a, p = 24 - (m - 28) * 2, 0
        active.append(a)
        pending.append(p / 4)  # plotted on the same axis, scaled /4
    return line_chart(
        820,
        360,
        "HikariCP pool of order-gateway (og-1), 2024-03-18 10:20-10:50",
        ["10:20", "10:25", "10:30", "10:35", "10:40", "10:45", "10:50"],
        [("active connections", "#3c5a99", active), ("pending threads / 4", "#c0392b", pending)],
        60,
        10,
        "conn",
        thresholds=[(50, "maximumPoolSize = 50", "#e67e22")],
        annotations=[(12, 50, "pool exhausted 10:32")],
    )


def img_schedule_editor() -> Image.Image:
    img, d = new_canvas(900, 420, "#f7f8fa")
    d.rectangle([0, 0, 900, 40], fill="#1f2d3d")
    d.text(
        (16, 20), "Keelvault   Jobs > web-nightly > Edit schedule", font=font(15, bold=True), fill="white", anchor="lm"
    )
    fields = [
        ("Job name", "web-nightly"),
        ("Sources", "web01, web02"),
        ("Schedule type", "Daily"),
        ("Start time", "01:00  (appliance time zone Europe/Berlin)"),
        ("Cron (generated)", "0 1 * * *"),
        ("Start jitter", "up to 15 minutes"),
        ("Blackout window", "Mon-Fri 08:00-18:00   [x] pause running jobs"),
        ("Retention policy", "gfs-7-4-12   (7 daily, 4 weekly, 12 monthly)"),
        ("Retention lock", "14 days"),
    ]
    y = 62
    for label, value in fields:
        d.text((30, y + 15), label, font=font(14, bold=True), fill="#333333", anchor="lm")
        d.rounded_rectangle((230, y, 860, y + 30), radius=4, fill="white", outline="#c3c9d1")
        d.text((240, y + 15), value, font=font(14), fill="#111111", anchor="lm")
        y += 37
    box(d, (660, 378, 760, 410), "Cancel", fill="white", outline="#9aa5b1", size=14, radius=5)
    box(d, (770, 378, 860, 410), "Save", fill="#2e86de", outline="#1b4f72", size=14, bold=True, color="white", radius=5)
    return img


def img_restore_wizard() -> Image.Image:
    img, d = new_canvas(900, 430, "#f7f8fa")
    d.rectangle([0, 0, 900, 40], fill="#1f2d3d")
    d.text((16, 20), "Keelvault   Restore wizard", font=font(15, bold=True), fill="white", anchor="lm")
    steps = ["1 Snapshot", "2 Items", "3 Options", "4 Review"]
    for i, s in enumerate(steps):
        x = 30 + i * 215
        active = i == 2
        d.ellipse([x, 56, x + 26, 82], fill="#2e86de" if active or i < 2 else "#c3c9d1")
        d.text((x + 36, 69), s, font=font(14, bold=active), fill="#111111", anchor="lm")
    d.text(
        (30, 110),
        "Snapshot:  snap-20240917-0100-web01   (2024-09-17 01:04, 48.2 GB)",
        font=font(14),
        fill="#111111",
        anchor="lm",
    )
    d.text(
        (30, 138),
        "Items:  /etc/nginx  (37 files)   /var/www/shop  (12,418 files)",
        font=font(14),
        fill="#111111",
        anchor="lm",
    )
    opts = [
        ("Restore to", "( ) original location   (o) another location:  web01:/tmp/restore"),
        ("If file exists", "(o) never overwrite   ( ) overwrite if newer   ( ) always overwrite"),
        ("Permissions", "[x] restore owners and ACLs"),
        ("Verification", "[x] verify checksums after restore"),
        ("Bandwidth limit", "0 Mbit/s  (unlimited)"),
    ]
    y = 170
    for label, value in opts:
        d.text((30, y + 15), label, font=font(14, bold=True), fill="#333333", anchor="lm")
        d.rounded_rectangle((200, y, 870, y + 30), radius=4, fill="white", outline="#c3c9d1")
        d.text((210, y + 15), value, font=font(13), fill="#111111", anchor="lm")
        y += 40
    box(d, (660, 385, 760, 417), "Back", fill="white", outline="#9aa5b1", size=14, radius=5)
    box(d, (770, 385, 870, 417), "Next", fill="#2e86de", outline="#1b4f72", size=14, bold=True, color="white", radius=5)
    return img


def img_key_hierarchy() -> Image.Image:
    img, d = new_canvas(880, 440)
    d.text((440, 22), "Keelvault key hierarchy", font=font(18, bold=True), fill="#111111", anchor="mm")
    box(
        d,
        (30, 60, 280, 130),
        "Key provider\nTPM 2.0 | KMIP | AWS KMS |\nVault transit | passphrase",
        fill="#f5eef8",
        outline="#7d3c98",
        size=13,
    )
    box(
        d,
        (600, 60, 850, 130),
        "Recovery key\n24 words (256 bits)\nprinted once at setup",
        fill="#fdedec",
        outline="#c0392b",
        size=13,
    )
    box(
        d,
        (30, 180, 280, 250),
        "KEK  key-encryption key\nrotated every 90 days",
        fill="#fef9e7",
        outline="#b7950b",
        size=14,
        bold=True,
    )
    box(
        d,
        (315, 180, 565, 250),
        "DEK  data-encryption key\none per repository, 256-bit",
        fill="#e8f0fe",
        outline="#3c5a99",
        size=14,
        bold=True,
    )
    box(
        d,
        (315, 320, 565, 400),
        "Chunks (~64 KiB)\nAES-256-GCM\nunique 96-bit nonce per chunk",
        fill="#e9f7ef",
        outline="#1e8449",
        size=14,
    )
    arrow(d, (155, 130), (155, 180), label="holds / unwraps", label_offset=(62, 0))
    arrow(d, (280, 215), (315, 215))
    d.text((297, 268), "wraps", font=font(12), fill="#333333", anchor="mm")
    poly_arrow(d, [(725, 130), (725, 215), (565, 215)], label="also wraps DEK", label_at=(790, 172))
    arrow(d, (440, 250), (440, 320), label="encrypts", label_offset=(40, 0))
    return img


DISK_IMAGES = {  # (kb, file name) -> drawing function; referenced from .md / .html sources
    (ZH, "cpu-triage-flow.png"): img_cpu_triage_flow,
    (ZH, "top-output-screenshot.png"): img_top_screenshot,
    (ZH, "release-pipeline.png"): img_release_pipeline,
    (ZH, "alert-levels-table.png"): img_alert_levels_table,
    (ZH, "platform-architecture.png"): img_platform_architecture,
    (EN, "port-matrix-table.png"): img_port_matrix,
    (EN, "deployment-topology.png"): img_deployment_topology,
    (EN, "jobs-page-screenshot.png"): img_jobs_page,
}
EMBEDDED_IMAGES = {  # key used in the [[img:key|...]] markup -> drawing function
    "heap-chart": img_heap_chart,
    "pool-chart": img_pool_chart,
    "schedule-editor": img_schedule_editor,
    "restore-wizard": img_restore_wizard,
    "key-hierarchy": img_key_hierarchy,
}


# ---------------------------------------------------------------------------------------
# Mini markup -> blocks
# ---------------------------------------------------------------------------------------


@dataclass
class Block:
    kind: str  # title | h | p | ol | ul | table | code | img
    text: str = ""
    level: int = 0
    items: list | None = None
    width_cm: float = 0.0
    key: str = ""


_IMG_RE = re.compile(r"^\[\[img:(?P<key>[\w-]+)\|(?P<cap>[^|\]]*)(?:\|(?P<w>[\d.]+))?\]\]$")
_OL_RE = re.compile(r"^\d+\.\s+")


def parse_markup(src: str) -> list[Block]:
    blocks: list[Block] = []
    lines = src.strip("\n").split("\n")
    i = 0
    para: list[str] = []

    def flush():
        if para:
            blocks.append(Block("p", " ".join(s.strip() for s in para)))
            para.clear()

    while i < len(lines):
        line = lines[i].rstrip()
        s = line.strip()
        if not s:
            flush()
            i += 1
            continue
        if s.startswith("```"):
            flush()
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith("```"):
                j += 1
            blocks.append(Block("code", "\n".join(lines[i + 1 : j])))
            i = j + 1
            continue
        m = re.match(r"^(#{1,4})\s+(.*)$", s)
        if m:
            flush()
            n = len(m.group(1))
            blocks.append(Block("title", m.group(2)) if n == 1 else Block("h", m.group(2), n - 1))
            i += 1
            continue
        m = _IMG_RE.match(s)
        if m:
            flush()
            blocks.append(Block("img", m.group("cap"), key=m.group("key"), width_cm=float(m.group("w") or 15)))
            i += 1
            continue
        if s.startswith("|"):
            flush()
            rows = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                row = lines[i].strip()
                if not re.match(r"^\|[\s:|-]+\|$", row):
                    rows.append([c.strip() for c in row.strip("|").split("|")])
                i += 1
            blocks.append(Block("table", items=rows))
            continue
        if _OL_RE.match(s) or s.startswith("- "):
            flush()
            kind = "ul" if s.startswith("- ") else "ol"
            items = []
            while i < len(lines):
                t = lines[i].strip()
                if kind == "ol" and _OL_RE.match(t):
                    items.append(_OL_RE.sub("", t))
                elif kind == "ul" and t.startswith("- "):
                    items.append(t[2:])
                elif t and lines[i].startswith("   ") and items:  # continuation line
                    items[-1] += " " + t
                else:
                    break
                i += 1
            blocks.append(Block(kind, items=items))
            continue
        para.append(s)
        i += 1
    flush()
    return blocks


# ---------------------------------------------------------------------------------------
# DOCX writer
# ---------------------------------------------------------------------------------------


def _restart_numbering(doc) -> int:
    """A new w:num for the 'List Number' list so that this list starts again at 1."""
    numbering = doc.part.numbering_part.numbering_definitions._numbering
    style_num_id = doc.styles["List Number"].element.pPr.numPr.numId.val
    abstract_id = numbering.num_having_numId(style_num_id).abstractNumId.val
    num = numbering.add_num(abstract_id)
    num.add_lvlOverride(ilvl=0).add_startOverride(1)
    return num.numId


def _set_num(paragraph, num_id: int) -> None:
    num_pr = paragraph._p.get_or_add_pPr().get_or_add_numPr()
    num_pr.get_or_add_ilvl().val = 0
    num_pr.get_or_add_numId().val = num_id


def _normalize_zip(path: Path) -> None:
    """Rewrite the ZIP with fixed timestamps and order so the file is byte-for-byte stable."""
    with zipfile.ZipFile(path) as zin:
        entries = [(info.filename, zin.read(info.filename)) for info in zin.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zout:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zout.writestr(info, data)


def build_docx(path: Path, src: str, *, title: str, author: str, subject: str, lang: str) -> None:
    from docx import Document
    from docx.enum.style import WD_STYLE_TYPE
    from docx.oxml.ns import qn
    from docx.shared import Cm, Pt, RGBColor

    cjk = lang.startswith("zh")
    doc = Document()
    cp = doc.core_properties
    cp.title, cp.author, cp.subject, cp.language = title, author, subject, lang
    cp.last_modified_by, cp.revision = author, 1
    cp.created = cp.modified = FIXED_DATE
    cp.last_printed = FIXED_DATE
    cp.keywords = "sample knowledge base, corpus_pipeline"

    normal = doc.styles["Normal"]
    normal.font.name = "Calibri"
    normal.font.size = Pt(10.5 if cjk else 11)
    if cjk:
        for style_name in ["Normal", "Title", "Heading 1", "Heading 2", "Heading 3", "Caption"]:
            rpr = doc.styles[style_name].element.get_or_add_rPr()
            rpr.get_or_add_rFonts().set(qn("w:eastAsia"), "SimSun")
    code = doc.styles.add_style("Code", WD_STYLE_TYPE.PARAGRAPH)
    code.base_style = normal
    code.font.name = "Consolas"
    code.font.size = Pt(9)
    code.paragraph_format.space_after = Pt(6)
    code.paragraph_format.left_indent = Cm(0.5)

    for b in parse_markup(src):
        if b.kind == "title":
            doc.add_heading(b.text, 0)
        elif b.kind == "h":
            doc.add_heading(b.text, min(b.level, 3))
        elif b.kind == "p":
            doc.add_paragraph(b.text)
        elif b.kind == "ol":
            num_id = _restart_numbering(doc)
            for item in b.items:
                _set_num(doc.add_paragraph(item, style="List Number"), num_id)
        elif b.kind == "ul":
            for item in b.items:
                doc.add_paragraph(item, style="List Bullet")
        elif b.kind == "table":
            rows = b.items
            table = doc.add_table(rows=len(rows), cols=len(rows[0]))
            table.style = doc.styles["Light Grid Accent 1"]
            for r, row in enumerate(rows):
                for c, cell_text in enumerate(row):
                    cell = table.cell(r, c)
                    cell.text = cell_text
                    if r == 0:
                        for run in cell.paragraphs[0].runs:
                            run.bold = True
            doc.add_paragraph()
        elif b.kind == "code":
            p = doc.add_paragraph(style="Code")
            for k, ln in enumerate(b.text.split("\n")):
                run = p.add_run(ln)
                run.font.color.rgb = RGBColor(0x1F, 0x2D, 0x3D)
                if k < b.text.count("\n"):
                    run.add_break()
        elif b.kind == "img":
            data = png_bytes(EMBEDDED_IMAGES[b.key]())
            doc.add_picture(io.BytesIO(data), width=Cm(b.width_cm))
            doc.add_paragraph(b.text, style="Caption")
    path.parent.mkdir(parents=True, exist_ok=True)
    doc.save(str(path))
    _normalize_zip(path)


# ---------------------------------------------------------------------------------------
# PDF writer
# ---------------------------------------------------------------------------------------

CJK_TTF_CANDIDATES = [  # (path, subfont index): TrueType outlines, embeddable by reportlab
    ("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc", 0),
    ("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc", 0),
    ("/usr/share/fonts/truetype/arphic/uming.ttc", 0),
]


def _cjk_font(kind: str) -> str:
    """Register and return a CJK font name: kind 'cid' (STSong-Light) or 'ttf' (embedded)."""
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
    from reportlab.pdfbase.ttfonts import TTFont

    if kind == "ttf":
        for file, index in CJK_TTF_CANDIDATES:
            if Path(file).is_file():
                if "CJK-TTF" not in pdfmetrics.getRegisteredFontNames():
                    pdfmetrics.registerFont(TTFont("CJK-TTF", file, subfontIndex=index))
                return "CJK-TTF"
        print(
            "note: no CJK TrueType font found (apt-get install fonts-wqy-microhei); "
            "falling back to the non-embedded STSong-Light",
            file=sys.stderr,
        )
    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    return "STSong-Light"


def build_pdf(
    path: Path, src: str, *, title: str, author: str, subject: str, lang: str, footer: str, cjk_font: str = "cid"
) -> None:
    from reportlab.lib import colors
    from reportlab.lib.enums import TA_CENTER
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.lib.units import cm
    from reportlab.platypus import (
        Image as RLImage,
    )
    from reportlab.platypus import (
        Paragraph,
        Preformatted,
        SimpleDocTemplate,
        Spacer,
        Table,
        TableStyle,
    )

    cjk = lang.startswith("zh")
    if cjk:
        base = bold = mono = _cjk_font(cjk_font)
    else:
        base, bold, mono = "Helvetica", "Helvetica-Bold", "Courier"
    wrap = "CJK" if cjk else None
    body = ParagraphStyle("body", fontName=base, fontSize=10.5, leading=16 if cjk else 14, spaceAfter=6, wordWrap=wrap)
    styles = {
        "title": ParagraphStyle(
            "title",
            parent=body,
            fontName=bold,
            fontSize=20,
            leading=26,
            spaceAfter=14,
            textColor=colors.HexColor("#1f2d3d"),
        ),
        1: ParagraphStyle(
            "h1",
            parent=body,
            fontName=bold,
            fontSize=15,
            leading=20,
            keepWithNext=1,
            spaceBefore=12,
            spaceAfter=6,
            textColor=colors.HexColor("#2f4b7c"),
        ),
        2: ParagraphStyle(
            "h2",
            parent=body,
            fontName=bold,
            fontSize=12.5,
            leading=17,
            keepWithNext=1,
            spaceBefore=8,
            spaceAfter=4,
            textColor=colors.HexColor("#2f4b7c"),
        ),
        3: ParagraphStyle(
            "h3", parent=body, fontName=bold, fontSize=11, leading=15, keepWithNext=1, spaceBefore=6, spaceAfter=3
        ),
    }
    item_style = ParagraphStyle("item", parent=body, leftIndent=20, bulletIndent=6, spaceAfter=3)
    cell_style = ParagraphStyle("cell", parent=body, fontSize=9, leading=12 if not cjk else 13, spaceAfter=0)
    head_style = ParagraphStyle("head", parent=cell_style, fontName=bold, textColor=colors.white)
    code_style = ParagraphStyle(
        "code",
        fontName=mono,
        fontSize=8.5,
        leading=11.5,
        backColor=colors.HexColor("#f3f4f6"),
        borderPadding=5,
        leftIndent=6,
        spaceBefore=4,
        spaceAfter=10,
    )
    caption = ParagraphStyle(
        "caption", parent=body, fontSize=9, alignment=TA_CENTER, textColor=colors.HexColor("#555555")
    )

    frame_width = A4[0] - 4 * cm
    story = []
    for b in parse_markup(src):
        if b.kind == "title":
            story.append(Paragraph(escape(b.text), styles["title"]))
        elif b.kind == "h":
            story.append(Paragraph(escape(b.text), styles[min(b.level, 3)]))
        elif b.kind == "p":
            story.append(Paragraph(escape(b.text), body))
        elif b.kind in ("ol", "ul"):
            for k, item in enumerate(b.items, 1):
                story.append(
                    Paragraph(escape(item), item_style, bulletText=f"{k}." if b.kind == "ol" else "-")
                )  # "\u2022" extracts as (cid:127)
            story.append(Spacer(1, 4))
        elif b.kind == "table":
            rows = b.items
            ncols = len(rows[0])
            lens = [max(len(r[c]) for r in rows) for c in range(ncols)]
            total = sum(min(max(n, 4), 40) for n in lens)
            widths = [frame_width * min(max(n, 4), 40) / total for n in lens]
            data = [
                [Paragraph(escape(c), head_style if r == 0 else cell_style) for c in row] for r, row in enumerate(rows)
            ]
            t = Table(data, colWidths=widths, repeatRows=1, hAlign="LEFT")
            t.setStyle(
                TableStyle(
                    [
                        ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#2f4b7c")),
                        ("ROWBACKGROUNDS", (0, 1), (-1, -1), [colors.white, colors.HexColor("#f2f4f8")]),
                        ("GRID", (0, 0), (-1, -1), 0.5, colors.HexColor("#9aa5b1")),
                        ("VALIGN", (0, 0), (-1, -1), "TOP"),
                        ("TOPPADDING", (0, 0), (-1, -1), 3),
                        ("BOTTOMPADDING", (0, 0), (-1, -1), 4),
                    ]
                )
            )
            story += [t, Spacer(1, 8)]
        elif b.kind == "code":
            story.append(Preformatted(b.text, code_style, maxLineLength=95 if not cjk else 80, newLineChars=""))
        elif b.kind == "img":
            data = png_bytes(EMBEDDED_IMAGES[b.key]())
            w_px, h_px = Image.open(io.BytesIO(data)).size
            w = min(b.width_cm * cm, frame_width)
            story += [
                Spacer(1, 4),
                RLImage(io.BytesIO(data), width=w, height=w * h_px / w_px),
                Paragraph(escape(b.text), caption),
            ]

    def on_page(canvas, doc_):
        canvas.saveState()
        canvas.setFont(base, 8.5)
        canvas.setFillColor(colors.HexColor("#777777"))
        canvas.drawString(2 * cm, 1.2 * cm, footer)
        canvas.drawRightString(A4[0] - 2 * cm, 1.2 * cm, f"{doc_.page}")
        canvas.restoreState()

    path.parent.mkdir(parents=True, exist_ok=True)
    doc = SimpleDocTemplate(
        str(path),
        pagesize=A4,
        leftMargin=2 * cm,
        rightMargin=2 * cm,
        topMargin=2 * cm,
        bottomMargin=2 * cm,
        title=title,
        author=author,
        subject=subject,
        creator="scripts/make_sample_docs.py",
        lang=lang,
        invariant=1,
    )
    doc.build(story, onFirstPage=on_page, onLaterPages=on_page)


# ---------------------------------------------------------------------------------------
# Document texts (DOCX and PDF)
# ---------------------------------------------------------------------------------------

ZH_MEMORY_LEAK = r"""
# 内存泄漏排查手册

文档编号：OPS-RB-002　维护人：基础架构组 张磊　更新日期：2024-05-27　适用服务：所有 Java 服务（JDK 17，G1 垃圾回收器）

## 一、问题现象

出现以下任一现象时，应怀疑内存泄漏，并按本手册排查：

- 告警 JvmOldGenHigh 触发：老年代在 Full GC 之后使用率仍超过 80%，持续 15 分钟（P2 级）。
- Full GC 频率每小时超过 6 次，或单次 Full GC 停顿时间超过 1 秒。
- 容器内存（RSS）持续增长并接近 12 GiB 的 limit，Pod 被 OOMKilled（退出码 137）。
- 应用日志出现 java.lang.OutOfMemoryError，类型可能是 Java heap space、Metaspace 或 Direct buffer memory。

下图是 2024 年 5 月 order-gateway 一次真实泄漏的监控曲线：每次 Full GC 之后的老年代使用率（红线）每天抬高约 11 个百分点，第 6 天超过 80% 告警线。

[[img:heap-chart|图 1　order-gateway 实例 og-3 老年代使用率（2024-05-06 至 05-11）|15]]

## 二、排查步骤

### 2.1 确认是否真的泄漏

1. 执行 jstat -gcutil <PID> 5000 20，观察 O 列（老年代使用率）在 FGC 计数增加之后是否明显回落。回落到 40% 以下说明只是堆偏小或流量大，不是泄漏。
2. 在 Grafana「JVM 概览」面板查看 7 天趋势：锯齿形曲线的「谷底」持续抬高，是泄漏最可靠的信号。
3. 排除配置问题：确认 -Xmx 与容器 limit 匹配。生产标准为堆 8 GB、容器 limit 12 GiB，剩余部分留给元空间、线程栈和堆外内存。

### 2.2 采集堆转储（heap dump）

1. 先在 Nacos 控制台把该实例权重调为 0，摘除流量，避免导出期间影响交易。
2. 执行 jmap -dump:live,format=b,file=/data/diag/heap.hprof <PID>。注意 live 参数会先触发一次 Full GC；8 GB 的堆导出约需 40–60 秒，期间进程完全暂停。
3. 如果 jmap 报错 Unable to open socket file，改用 jcmd <PID> GC.heap_dump /data/diag/heap.hprof，并确认执行用户与进程用户一致（均为 trade）。
4. 压缩后传到诊断服务器：gzip 之后 scp 到 diag-01:/archive/heapdump/，并删除应用主机上的原文件。
5. 导出完成后不要立即恢复流量，先重启该实例，确认内存回到正常水位。

### 2.3 分析堆转储

#### 2.3.1 使用 Eclipse MAT

- 使用诊断服务器 diag-01 上安装的 Eclipse MAT（已配置 32 GB 内存，可打开 20 GB 以内的 dump）。
- 首先查看 Leak Suspects 报告，它会列出占用内存最多的对象及其引用链。
- 在 Dominator Tree 中按 Retained Heap 排序，找出保留内存最多的对象，再用 Path to GC Roots（排除弱引用、软引用）查看是谁持有它。

#### 2.3.2 对比两次 dump

间隔 1 小时导出两次 dump，在 MAT 中使用 Compare Basket 功能对比直方图（Histogram），实例数和 Retained Heap 增长最多的类通常就是泄漏点。注意两次 dump 都要使用 live 参数，否则未回收的垃圾对象会干扰对比结果。

### 2.4 堆外内存泄漏

如果堆内使用正常但容器 RSS 持续增长，属于堆外内存泄漏：

1. 在启动参数中加入 -XX:NativeMemoryTracking=summary（会带来约 5% 的性能开销，只在排查期间开启）。
2. 执行 jcmd <PID> VM.native_memory baseline，1 小时后执行 jcmd <PID> VM.native_memory summary.diff，查看哪一类增长。
3. Netty 直接内存泄漏时，日志中会出现 LEAK: ByteBuf.release() was not called；可以临时设置 -Dio.netty.leakDetection.level=advanced 获取分配位置。

## 三、常见泄漏原因

| 原因 | 典型特征 | 历史案例 |
| 本地缓存没有上限 | HashMap 或 ConcurrentHashMap 持续增长 | 2024-05 risk-engine 客户画像缓存未设置 maximumSize，改为 Caffeine maximumSize=200000、expireAfterWrite=10m |
| ThreadLocal 未清理 | 线程池线程持有大对象，Dominator Tree 中可见 ThreadLocalMap | 2023-11 account-service 在 ThreadLocal 中缓存查询结果 |
| 监听器或回调未注销 | 大量匿名内部类实例被事件总线引用 | 2023-08 market-data-feed 订阅对象未在断线时移除 |
| 一次性加载大结果集 | 单次请求分配数百 MB，常伴随 OOM | settlement-service 对账一次查询 300 万行，改为按 5 万行分页 |
| Netty ByteBuf 未释放 | 堆外内存增长，日志中有 LEAK 提示 | 2024-01 order-gateway 自定义解码器异常分支未 release |

## 四、解决方案

### 4.1 临时措施

1. 滚动重启：每次重启不超过 25% 的实例，间隔 5 分钟，交易时段内需要值班经理同意。
2. 在容器 limit 允许的范围内临时调大堆内存，但堆不能超过容器 limit 的 75%。
3. 定时重启只能作为过渡手段，最长保留 2 周，必须同时登记整改工单。

### 4.2 根本修复

- 所有本地缓存必须使用 Caffeine 并设置 maximumSize 和过期时间，代码评审时作为必查项。
- ThreadLocal 必须在 finally 中调用 remove()。
- 批量查询统一使用分页或流式游标，单次加载不超过 5 万行。

### 4.3 验证标准

修复版本在预发环境以生产峰值流量连续压测 24 小时，Full GC 之后的老年代使用率稳定在 50% 以下，且 24 小时内没有增长趋势，才允许发布到生产。

## 五、JVM 标准启动参数

```
-Xms8g -Xmx8g -XX:+UseG1GC -XX:MaxGCPauseMillis=100
-XX:+HeapDumpOnOutOfMemoryError -XX:HeapDumpPath=/tmp/heapdump
-Xlog:gc*:file=/data/logs/gc.log:time,uptime:filecount=10,filesize=100m
```
"""

ZH_KAFKA_LAG = r"""
# Kafka 消息积压处理

文档编号：OPS-RB-009　维护人：消息中间件负责人 刘洋　更新日期：2024-06-18

## 一、问题现象

星澜交易平台的成交回报经 Kafka topic trade-executions（32 个分区）发送给 settlement-service 做实时清算，消费组为 settlement-consumer。消息积压会导致客户资金和持仓更新延迟，交易时段内直接影响客户的可用资金。

- 告警 KafkaConsumerLagHigh：消费组 settlement-consumer 的总 lag 超过 50,000 条并持续 5 分钟（P2）。
- lag 超过 500,000 条，或者 lag 连续 15 分钟只增不减（P1）。
- 客户反馈「成交了但持仓没变」「资金没有解冻」。

## 二、排查步骤

### 2.1 查看积压分布

1. 执行 kafka-consumer-groups.sh --bootstrap-server kafka-01:9092 --describe --group settlement-consumer，查看每个分区的 CURRENT-OFFSET、LOG-END-OFFSET 和 LAG。
2. 如果积压集中在一两个分区：属于分区倾斜，通常是热点账户（消息 key 为资金账号）导致，转 2.4。
3. 如果所有分区都在积压：说明整体消费能力不足，继续 2.2。

### 2.2 检查消费者状态

1. 确认消费者实例数量：settlement-service 共 4 个实例，每个实例 8 个消费线程，合计 32 个线程，与分区数相同。消费线程数超过分区数没有意义。
2. 在日志中搜索 Revoking previously assigned partitions，判断是否在频繁 rebalance。每次 rebalance 会暂停整个消费组 3–10 秒。
3. 检查 max.poll.interval.ms（生产配置 300000）和 max.poll.records（生产配置 500）：单批处理时间超过 300 秒会被踢出消费组，引发 rebalance。

### 2.3 检查下游依赖

- settlement-service 每条消息需要写 trade-db，在 SkyWalking 中查看 SQL 耗时，正常 P99 低于 8 ms。
- 如果 trade-db 写入变慢，按《数据库连接池耗尽》手册排查。
- 日终清算（16:30 开始）期间 trade-db 负载较高，lag 短暂上升到 10 万以内属于正常现象。

### 2.4 分区倾斜

- 使用 kafka-run-class.sh kafka.tools.GetOffsetShell 统计最近 10 分钟各分区的写入量。
- 如果是程序化交易客户的高频委托导致，可在 risk-engine 侧对该账户限速（单账户每秒 200 笔）。

## 三、处理方法

| 场景 | 处理方法 | 注意事项 |
| 下游写库慢 | 优化 SQL，开启批量写入（每批 200 条） | 批量写入需保证同一账户的顺序 |
| 频繁 rebalance | 将 max.poll.records 调小到 200，或调大 max.poll.interval.ms | 修改后需要滚动重启消费者 |
| 毒消息反复失败 | 重试 3 次后转入死信 topic trade-executions-dlq | 死信消息由清算组在当天人工处理 |
| 消费能力不足 | 扩容消费者，最多 32 个线程 | 超过分区数的线程会空闲 |
| 分区倾斜 | 对热点账户限速，评估调整分区键 | 不能在交易时段修改分区键 |

特别注意：禁止在交易时段增加 trade-executions 的分区数。分区数变化会改变「资金账号 → 分区」的映射关系，导致同一账户的消息乱序，造成清算错误。

## 四、数据补偿与 offset 重置

如果需要跳过或重新消费某段消息，必须由清算组负责人审批，并按以下步骤操作：

1. 停止消费组内所有消费者（kubectl scale deploy/settlement-service -n clearing --replicas=0），offset 只能在消费组没有活跃成员时重置。
2. 先预演：kafka-consumer-groups.sh --reset-offsets --group settlement-consumer --topic trade-executions --to-datetime 2024-06-03T10:15:00.000 --dry-run。
3. 确认无误后把 --dry-run 换成 --execute 执行。
4. 恢复消费者实例数为 4。
5. settlement-service 按 execution_id 幂等去重（唯一索引 uk_execution_id），重复消费不会重复记账，但会在日志中打印 duplicate execution ignored。

## 五、预防措施

- 每季度按 1.5 倍峰值流量对清算链路做一次压测，消费能力需达到每秒 30,000 条。
- 消费延迟监控除了 lag 条数，还要监控「最老未消费消息的时间」，超过 60 秒即告警。
- 所有新增 topic 必须在消息中间件平台登记分区键、保留时间（默认 72 小时）和负责人。
"""

ZH_DB_POOL = r"""
# 数据库连接池耗尽

文档编号：OPS-RB-003　维护人：DBA 组 马超、交易系统研发部 孙浩　更新日期：2024-04-08　适用服务：order-gateway、risk-engine、settlement-service、account-service

## 一、问题现象

连接池耗尽时，应用线程拿不到数据库连接，请求排队直至超时。典型表现如下：

- 应用日志出现：HikariPool-1 - Connection is not available, request timed out after 3000ms。
- 告警 DbPoolUsageHigh：活跃连接数 / 最大连接数超过 90%，持续 2 分钟（P2）；等待连接的线程数（pending）超过 20 时升级为 P1。
- order-gateway 下单接口 P99 延迟从 15 ms 上升到 3 秒以上，错误码 ORD-5031（数据库繁忙）大量出现。
- trade-db 主库活跃会话数（Threads_running）超过 200，CPU 使用率超过 90%。

下图为 2024-03-18 事故期间 order-gateway 实例 og-1 的连接池监控：10:32 活跃连接数达到上限 50，等待线程数在 10:40 前后达到 180。

[[img:pool-chart|图 1　order-gateway 连接池活跃连接数与等待线程数（2024-03-18 10:20–10:50）|15]]

## 二、原因分析

连接池耗尽本身只是结果，常见根因有五类：

| 根因 | 判断依据 | 占历史故障比例 |
| 慢 SQL | 慢查询日志中出现执行时间超过 1 秒的语句，通常是缺少索引或执行计划变化 | 约 45% |
| 长事务 | information_schema.innodb_trx 中存在运行超过 10 秒的事务，常见于 @Transactional 方法中调用了远程接口 | 约 20% |
| 锁等待 | 大量会话处于 Waiting for row lock，innodb_lock_wait_timeout 为 10 秒 | 约 15% |
| 连接泄漏 | 连接借出后未归还，HikariCP 打印 Connection leak detection triggered | 约 10% |
| 流量增长、池太小 | 慢 SQL 和长事务都不存在，但 QPS 比平时高出 2 倍以上 | 约 10% |

## 三、排查步骤

### 3.1 确认影响范围

1. 打开 Grafana「HikariCP 连接池」面板，查看 hikaricp_connections_active、hikaricp_connections_pending 和 hikaricp_connections_timeout_total 三个指标。
2. 判断是单个实例还是全部实例：单个实例通常是连接泄漏或该实例上的某个大请求；全部实例则多半是数据库侧问题（慢 SQL、锁等待）。
3. 同时查看 trade-db 主库的 CPU、Threads_running 和 QPS，如果数据库本身已经过载，不要扩容应用（见第四章）。

### 3.2 数据库侧检查

以下命令由值班 DBA 执行，运维人员可使用只读账号 ops_ro 执行查询类命令：

```
# 1. 按客户端主机和用户统计当前连接数
mysql -h trade-db-master -u ops_ro -p -e "SELECT user, SUBSTRING_INDEX(host, ':', 1) AS client, COUNT(*) AS conns FROM information_schema.processlist GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 20;"

# 2. 找出运行超过 10 秒的事务
mysql -h trade-db-master -u ops_ro -p -e "SELECT trx_id, trx_started, trx_mysql_thread_id, LEFT(trx_query, 120) FROM information_schema.innodb_trx WHERE trx_started < NOW() - INTERVAL 10 SECOND;"

# 3. 查看锁等待关系（MySQL 8.0）
mysql -h trade-db-master -u ops_ro -p -e "SELECT * FROM sys.innodb_lock_waits\G"

# 4. 必要时终止阻塞会话 —— 只能由 DBA 在值班经理确认后执行
# KILL 1234567;
```

### 3.3 应用侧检查

1. 使用 jstack 导出线程栈，统计停在 com.zaxxer.hikari.pool.HikariPool.getConnection 的线程数量，数量接近业务线程池大小（order-gateway 为 400）说明请求已全部阻塞在取连接上。
2. 检查是否有连接泄漏：生产环境已配置 leakDetectionThreshold=20000（20 秒），日志中搜索 Connection leak detection triggered，日志会打印借出连接的调用栈。
3. 检查最近 24 小时是否有发布或配置变更，特别是新增的 SQL 和事务范围的调整。

## 四、解决方案

### 4.1 紧急处理

1. 慢 SQL 导致：如果慢 SQL 来自非核心功能（例如报表查询、当日委托汇总），立即通过 Nacos 功能开关降级该功能；否则由 DBA 评估后在线添加索引。
2. 长事务或锁等待导致：由 DBA 终止阻塞源头会话，并通知对应服务负责人。
3. 连接泄漏导致：摘除并重启泄漏实例，保留一份 jstack 后再重启。
4. 流量增长导致：临时调大连接池，平台封装的数据源支持通过 Nacos 配置 spring.datasource.hikari.maximum-pool-size 热更新，order-gateway 最大允许调到 80。

特别提醒：数据库已经过载时，不要扩容应用实例，也不要调大连接池。更多的连接只会让数据库更慢。2024-03-18 事故中，值班人员把 order-gateway 从 8 个实例扩到 16 个，连接数翻倍，trade-db CPU 升到 98%，反而延长了故障时间。

### 4.2 长期改进

- 非核心查询使用独立的连接池（舱壁隔离），大小固定为 10，避免拖垮下单链路。
- 所有新增 SQL 在 CI 阶段通过 SQL 审核平台检查执行计划，扫描行数超过 10 万行的语句禁止上线。
- 事务中禁止调用 RPC、HTTP 等远程接口，代码评审作为必查项。

## 五、连接池参数基线

各服务的 HikariCP 参数基线如下，调整需经 DBA 组审批。所有服务的连接总数（按最大实例数计算）必须低于 trade-db max_connections=2000 的 75%，即 1,500。

| 服务 | 实例数 | maximumPoolSize | minimumIdle | connectionTimeout | maxLifetime |
| order-gateway | 8（最多 16） | 50 | 10 | 3000 ms | 1800000 ms（30 分钟） |
| risk-engine | 6 | 40 | 10 | 2000 ms | 1800000 ms |
| settlement-service | 4 | 60 | 20 | 5000 ms | 1800000 ms |
| account-service | 4 | 30 | 5 | 3000 ms | 1800000 ms |

maxLifetime 必须小于 MySQL 的 wait_timeout（生产为 28800 秒），否则应用可能拿到已被服务端关闭的连接。idleTimeout 统一为 600000 ms（10 分钟）。
"""

ZH_POSTMORTEM = r"""
# 故障复盘报告：2024-03-18 order-gateway 下单超时

报告编号：PM-2024-007　故障级别：P0　报告人：交易系统研发部 孙浩　审核：技术运营中心 周建国　发布日期：2024-03-20

## 1 事故概要

2024 年 3 月 18 日（周一）10:28 至 10:51，星澜交易平台 order-gateway 出现大面积下单超时，持续 23 分钟。直接原因是 3 月 14 日发布的 order-gateway v2.15.0 新增了一条「当日委托汇总」查询 SQL，该 SQL 缺少合适的索引，在开盘后委托量上升时成为慢查询，耗尽了数据库连接池。

- 影响委托：41,200 笔委托超时，其中 38,900 笔客户重试后成功，2,300 笔客户放弃下单。
- 客户投诉：127 件。
- 监管报送：下单成功率低于 80% 的时间超过 5 分钟，由合规部于当日 12:40 完成报送。

## 2 时间线

| 时间 | 事件 |
| 03-14 19:30 | order-gateway v2.15.0 按常规窗口发布，灰度期间各项指标正常（晚间流量很低） |
| 03-18 10:28 | 告警 DbPoolUsageHigh（P2）触发，order-gateway 连接池使用率 92% |
| 10:31 | 下单成功率降至 96.4%，告警自动升级为 P1；主值班 孙浩 认领 |
| 10:34 | 下单超时率超过 20%，值班经理 周建国 宣布 P0，拉起电话会议桥 |
| 10:36 | 值班人员将 order-gateway 从 8 个实例扩容到 16 个，trade-db CPU 升至 98%，情况恶化 |
| 10:41 | DBA 马超 定位到慢 SQL：按账户和交易日查询当日委托，全表扫描约 1,800 万行，平均耗时 2.3 秒 |
| 10:45 | 值班经理决定降级，在 Nacos 中将 order.query.daily-summary.enabled 设为 false |
| 10:48 | 连接池恢复正常，下单成功率回升到 99.97% |
| 10:51 | 指标稳定 3 分钟后宣布恢复（按制度应观察 15 分钟，见改进项 5） |
| 20:30 | DBA 使用 gh-ost 在线添加索引 idx_account_date (account_id, trade_date, created_at)，耗时 47 分钟 |

## 3 根因分析

### 3.1 直接原因

新增 SQL 为 SELECT ... FROM orders WHERE account_id = ? AND trade_date = ? ORDER BY created_at DESC。orders 表原有索引为 (account_id, created_at)，优化器在数据分布变化后选择了主键全表扫描。开盘后该查询每秒约 300 次，每次 2.3 秒，占满了每个实例 50 个连接，导致下单请求无法获得连接。

### 3.2 深层原因

1. 代码评审只审查了 Java 代码，没有审查 SQL 执行计划。
2. 预发环境 orders 表只有生产数据量的 5%（约 90 万行），压测中该 SQL 耗时仅 30 ms，问题没有暴露。
3. 「当日委托汇总」属于非核心功能，却与下单共用同一个连接池，缺乏隔离。
4. 《数据库连接池耗尽》手册没有说明「数据库过载时不要扩容应用」，值班人员按经验扩容，加重了数据库压力。
5. 功能开关早已存在，但没有写进手册，直到故障发生 17 分钟后才被想到。

## 4 做得好的地方

- 告警在连接池使用率达到 92% 时及时触发，比业务指标下降早 3 分钟。
- P0 宣布后 2 分钟内拉起会议桥，DBA、研发、值班经理全部到位。
- 降级决策果断，决策后 3 分钟恢复。

## 5 改进项

| 序号 | 改进项 | 负责人 | 截止日期 | 状态 |
| 1 | SQL 审核平台接入 CI，扫描行数超过 10 万行的语句阻断上线 | DBA 组 马超 | 2024-04-15 | 已完成 |
| 2 | 预发环境数据量提升到生产的 50%，并每月同步一次脱敏数据 | 测试组 吴静 | 2024-05-31 | 进行中 |
| 3 | 《数据库连接池耗尽》手册补充「数据库过载时禁止扩容应用」和功能开关清单 | 运维值班组 王芳 | 2024-03-25 | 已完成 |
| 4 | 非核心查询使用独立连接池（大小 10），与下单链路隔离 | 交易系统研发部 孙浩 | 2024-04-30 | 已完成 |
| 5 | 值班培训：恢复后必须观察 15 分钟再宣布恢复 | 技术运营中心 周建国 | 2024-03-29 | 已完成 |

## 附录 A 相关数据

- 故障期间 trade-db 主库峰值：Threads_running 412，CPU 98%，慢查询 1.9 万条。
- order-gateway 峰值等待线程数：每实例约 180。
- 相关手册：《数据库连接池耗尽》（OPS-RB-003）、《告警分级与值班制度》（OPS-POL-001）。
"""

EN_BACKUP_SCHEDULES = r"""
# Backup Schedules and Retention Policies

Keelvault 3.4 administrator guide, chapter 4. This chapter explains how backup jobs are scheduled, how long their snapshots are kept, and how to plan the capacity that a retention policy needs.

## 1 Jobs, schedules and policies

A backup job ties together four things: the sources to protect (hosts, VMs, databases or shares), a schedule, a retention policy, and a target repository. A source can belong to several jobs, for example a nightly file backup and a 15-minute database log backup. Jobs are created under Jobs > New job in the web console or with kvctl job create.

Every new job gets the default schedule Nightly (daily at 01:00 in the appliance time zone) and the default retention policy gfs-7-4-12, unless you choose otherwise.

## 2 Schedule types

- Daily: once a day at a fixed time.
- Weekly: on selected weekdays at a fixed time.
- Monthly: on a day of the month (1–28) or on a relative day such as "last Friday".
- Interval: every N hours. The minimum is 1 hour for file and VM jobs and 15 minutes for database log jobs.
- Cron: a 5-field cron expression, evaluated in the appliance time zone.
- After job: start when another job finishes (chaining), for example a tape export after the nightly backup.

### 2.1 Cron expressions

| Expression | Meaning |
| 0 1 * * * | Every day at 01:00 (the default Nightly schedule) |
| 30 22 * * 1-5 | Monday to Friday at 22:30 |
| 0 */4 * * * | Every 4 hours, on the hour |
| 0 2 * * 0 | Sundays at 02:00 |
| 0 3 1 * * | The first day of every month at 03:00 |

Keelvault does not support the seconds field or the non-standard @reboot shortcut. Validate an expression with kvctl schedule check "0 2 * * 0", which prints the next five start times.

### 2.2 Start jitter

To avoid hundreds of jobs hitting the appliance and the network at the same second, each scheduled start is delayed by a random amount of up to 15 minutes (setting jobs.start_jitter_minutes). The delay for a given job is stable from day to day, so a job scheduled at 01:00 always starts at, say, 01:07. Set the jitter to 0 for jobs that must start exactly on time.

### 2.3 Blackout windows

A blackout window is a period in which no scheduled job starts, for example Monday to Friday 08:00–18:00 to keep production networks free during office hours. Jobs that would start in a blackout window start when it ends. Jobs already running when a window begins continue, unless the option Pause running jobs is enabled; paused jobs resume from where they stopped when the window ends. Manual runs (kvctl backup run) ignore blackout windows.

### 2.4 Daylight saving time

Jobs scheduled in the hour that is skipped when clocks go forward run at the first minute after the change (a job at 02:30 runs at 03:00). Jobs scheduled in the hour that is repeated when clocks go back run only once, in the first occurrence.

### 2.5 Editing a schedule in the web console

The screenshot shows the schedule editor of the job web-nightly.

[[img:schedule-editor|Figure 4-1  The schedule editor of the job web-nightly|15.5]]

1. Open Jobs, select the job and click Edit schedule.
2. Choose the schedule type and start time. The generated cron expression is shown below the start time.
3. Optionally set a blackout window and the start jitter.
4. Choose the retention policy and, if required, a retention lock in days.
5. Click Save. The next five start times are shown on the job's overview page.

## 3 Retention policies

### 3.1 GFS policies

Keelvault uses grandfather-father-son (GFS) retention. A GFS policy is written gfs-D-W-M or gfs-D-W-M-Y:

- D daily snapshots: the last snapshot of each of the last D days.
- W weekly snapshots: the last snapshot of each of the last W weeks (weeks end on Sunday).
- M monthly snapshots: the last snapshot of each of the last M months.
- Y yearly snapshots (optional): the last snapshot of each of the last Y years.

The default gfs-7-4-12 keeps at most 23 snapshots and covers one year. A snapshot that qualifies for several categories (for example the last snapshot of a Sunday that is also the end of a month) is stored once and counted in each category.

Other policy types are keep-last-N (the N newest snapshots) and keep-days-N (every snapshot of the last N days). Database log backups follow the daily part of the job's policy: with gfs-7-4-12, point-in-time recovery is possible to any second of the last 7 days.

### 3.2 Pruning and garbage collection

Expired snapshots are pruned every day at 03:00 (retention.prune_time). Pruning only removes snapshots from the catalog; the space is freed by garbage collection at 04:00 (retention.gc_time), or earlier when the repository is more than 85% full. Snapshots younger than 3 days (retention.min_retention_days) are never pruned, even if the policy would allow it. The last successful snapshot of a source is never pruned while the source still exists.

#### 3.2.1 Example

On Sunday 2024-09-15 at 03:00, a job with gfs-7-4-12 that backs up daily keeps the snapshots of 09-09 to 09-15 (daily), of 08-25, 09-01 and 09-08 (weekly; 09-15 is already kept as a daily), and the last snapshot of each month from October 2023 to August 2024 (monthly; September, the twelfth month, is covered by 09-15). The snapshot of 09-08 is pruned at 03:00 on 10-06, when it drops out of the last 4 weeks.

### 3.3 Retention locks

A retention lock makes the snapshots of a job immutable for a number of days: they cannot be deleted or pruned, by anyone, until the lock expires. A lock can be extended but never shortened, and it survives a factory reset of the appliance. Use at least 14 days for ransomware protection. On S3 targets, retention locks are implemented with S3 Object Lock in compliance mode.

## 4 Capacity planning

The physical space a policy needs depends on the daily change rate and the deduplication ratio. The table gives measured values for 10 TB of protected VM data with a 2% daily change rate and a deduplication ratio of 8:1:

| Policy | Snapshots kept | Physical space | Covers |
| keep-last-7 | 7 | 1.6 TB | 1 week |
| gfs-7-4-12 (default) | up to 23 | 2.1 TB | 1 year |
| gfs-14-8-12 | up to 34 | 2.4 TB | 1 year |
| gfs-14-8-12-3 | up to 37 | 3.0 TB | 3 years |

Keep at least 20% of the repository free: garbage collection needs working space, and new backups are refused above 95% usage (error KV-E2210).
"""

EN_STORAGE_TARGETS = r"""
# Storage Targets and Repositories

Keelvault 3.4 administrator guide, chapter 5. A repository is where Keelvault stores deduplicated, compressed and encrypted chunks and the metadata of snapshots. Each repository lives on one storage target. An appliance can have up to 16 repositories; deduplication works within a repository, not across repositories.

## 1 Supported targets

| Target | Protocol or interface | Immutability | Maximum repository size | Typical write throughput |
| Local disk pool | internal disks, RAID-6 | retention lock | 96 TB raw on KV-600 | 2.5 GB/s |
| NFS share | NFS v4.1 | retention lock only | 1 PB | 300–800 MB/s |
| SMB share | SMB 3.1.1 | retention lock only | 1 PB | 200–600 MB/s |
| S3-compatible object storage | S3 API, Signature V4 | S3 Object Lock (compliance) | unlimited | 150–1000 MB/s |
| Tape library | LTO-8 / LTO-9, SAS or FC | offline media (air gap) | by number of cartridges | 300–400 MB/s per drive |

## 2 Local disk pool

Hardware appliances ship with a local disk pool. The KV-200 uses 12 x 2 TB disks in RAID-6 with one hot spare (about 18 TB usable); the KV-600 uses 24 x 4 TB disks in two RAID-6 groups with two hot spares (about 76 TB usable). A failed disk is rebuilt onto the hot spare automatically; a rebuild of a 4 TB disk takes about 9 hours and reduces backup throughput by about 30%. Disk health is shown under Repositories > default > Hardware.

## 3 NFS and SMB shares

Use a dedicated share that no other system writes to. For NFS, Keelvault mounts the share itself with the options vers=4.1, hard, rsize=1048576, wsize=1048576; do not mount it yourself in /etc/fstab. NFS v3 is not supported because its locking is unreliable for the repository lock file.

1. Create the share on the NAS and give the appliance's IP address read-write access with root squashing disabled (NFS) or a dedicated service account (SMB).
2. Add the repository: kvctl repository add --name nas01 --type nfs --path nas01.example.internal:/export/keelvault.
3. Run kvctl repository test --name nas01. The test writes and reads 10 GB and reports throughput and latency; a latency above 20 ms per 1 MiB write means the share is too slow for more than 2 concurrent jobs.

## 4 S3-compatible object storage

Keelvault has been tested with AWS S3, MinIO (RELEASE.2023-09 and later), Wasabi and Ceph RGW (Reef). Data is uploaded in objects of 16 MiB (packs of chunks) using multipart uploads.

### 4.1 Required permissions

The IAM policy of the access key needs these permissions on the bucket:

- s3:ListBucket and s3:GetBucketLocation
- s3:GetObject, s3:PutObject and s3:DeleteObject
- s3:GetBucketObjectLockConfiguration and s3:PutObjectRetention (only for immutable repositories)

### 4.2 Adding an S3 repository

From the command line:

```
kvctl repository add --name s3-archive --type s3 \
    --endpoint https://s3.eu-central-1.amazonaws.com --region eu-central-1 \
    --bucket kv-backups --access-key-id AKIAEXAMPLE --object-lock
```

#### 4.2.1 Object Lock and storage classes

The bucket must have Object Lock enabled when it is created; it cannot be enabled later on AWS. S3 storage classes Glacier and Deep Archive are not supported for repositories because reads would take hours; use cloud tiering instead.

## 5 Cloud tiering

Cloud tiering keeps recent snapshots on the fast local repository and moves older ones to an S3 repository. The default is to move snapshots older than 30 days (tiering.after_days = 30). Tiered snapshots stay in the catalog and can be browsed and restored like any other; a restore from a tiered snapshot reads from S3 and is limited by internet bandwidth. Only chunks that are not referenced by newer local snapshots are moved, so tiering does not duplicate data.

## 6 Tape

Keelvault supports LTO-8 (12 TB native per cartridge) and LTO-9 (18 TB native) drives in libraries with a barcode reader. Standalone drives are not supported. Tape jobs copy existing snapshots to tape; they do not read from sources directly.

- A tape export job is usually chained after the weekly backup with the schedule type After job.
- Tapes are written in an open format (one tar-like archive per snapshot) and can be read by kv-tape-reader without an appliance, provided you have the recovery key.
- Cartridges are grouped in media pools; a pool has its own retention (for example 52 weeks) after which its tapes may be overwritten.
- Export the cartridges of the last weekly job through the library's mail slot and store them offsite; the console's Tape > Vault list shows which barcodes are offsite.

## 7 Moving a repository

To move a repository to new storage, add the new target as a second repository and use kvctl repository migrate --from default --to nas01. Migration copies chunks in the background at up to 200 MB/s by default (option --rate) while backups continue to the old repository; the switch happens at the end and takes less than a minute. Only after the migration reports completed can the old repository be detached.
"""

EN_RESTORE = r"""
# Restore Procedure

Keelvault 3.4 administrator guide, chapter 6. This chapter explains every kind of restore Keelvault supports, from a single file to a whole server, and how to test restores regularly. Read section 1 before starting any production restore.

## 1 Before you restore

1. Identify what must be restored and to which point in time. For databases, ask the application owner for the exact time of the last good state, including the time zone.
2. Find the snapshot: kvctl snapshot list --job <job> --source <host>, or Sources > host > Snapshots in the web console. Snapshot IDs look like snap-20240917-0100-web01 (date, scheduled time, host).
3. Check that the target has enough free space. A VM restore needs the VM's full provisioned size, not only the used size.
4. Decide whether to restore in place or to another location. Restoring to another location first is safer and is the default in the wizard.
5. If the restore is for a security incident, restore to an isolated network and choose a snapshot from before the first sign of compromise.

## 2 Restore types

| Type | Use it for | Typical time to first data | Notes |
| File-level | Single files or folders | seconds | Works from file, VM and share backups |
| Full VM | A whole virtual machine | minutes to hours | To the original VM (powered off) or as a new VM |
| Instant VM | Getting a VM running at once | under 2 minutes | Runs from the appliance over NFS, then migrates |
| Database point-in-time | PostgreSQL or MySQL to an exact second | depends on log volume | Needs log backups (every 15 min) |
| Bare-metal | A physical server with a dead disk | 30–90 minutes | Boot from the kv-rescue-3.4.iso image |

## 3 File-level restore in the web console

1. Open Restore > New restore, or click Restore next to a snapshot.
2. Step 1, Snapshot: choose the source and the snapshot. The calendar highlights days that have snapshots.
3. Step 2, Items: browse the snapshot and tick files and folders. Search by name pattern with wildcards, for example *.conf.
4. Step 3, Options: choose the target and the overwrite rule (see the screenshot).
5. Step 4, Review: check the summary and click Start restore. Progress is shown under Monitor > Restores.

[[img:restore-wizard|Figure 6-1  Restore wizard, step 3 (options)|15.5]]

The overwrite rule decides what happens when a file already exists at the target: never overwrite (the default, existing files are skipped and listed in the report), overwrite if newer (only when the file in the snapshot is newer), or always overwrite. Restore owners and ACLs is on by default; on Windows it needs the agent to run as LocalSystem.

## 4 File-level restore from the command line

kvctl restore start accepts these options:

- --snapshot ID: the snapshot to restore from (required).
- --path PATH: a file or folder inside the snapshot; repeat the option for several paths. Without it, the whole snapshot is restored.
- --target HOST:DIR: where to restore. Without it, files go back to their original location on the original host.
- --overwrite never|if-newer|always: the overwrite rule, default never.
- --restore-acls / --no-restore-acls: restore owners and permissions, default on.
- --verify: compare SHA-256 checksums of every restored file with the snapshot after the restore.
- --bandwidth-limit MBPS: limit the restore stream, default unlimited.

```
# Restore the nginx configuration of web01 from last night into a scratch folder
kvctl restore start --snapshot snap-20240917-0100-web01 \
    --path /etc/nginx --target web01:/tmp/restore --verify

# Follow progress (the restore ID is printed by the previous command)
kvctl restore status rst-4f2a91

# Put one file back in place, replacing the damaged copy
kvctl restore start --snapshot snap-20240917-0100-web01 \
    --path /etc/nginx/nginx.conf --overwrite always
```

Restores do not count against jobs.max_concurrent_jobs; up to 8 restores can run at the same time on a KV-200 and 32 on a KV-600.

## 5 Full VM restore

For VMware, a VM can be restored over the original VM, which must be powered off, or as a new VM with a new name (the default adds the suffix -restored). Choose the target host, datastore and network in the wizard. Network adapters of a restored copy are disconnected by default to avoid IP conflicts with the original. For Proxmox VE 8, choose the target node and storage; the VM gets the next free VM ID unless you set one.

## 6 Instant VM restore

Instant restore starts a VM directly from the backup repository in under 2 minutes. The appliance exports the snapshot's disks over NFS (port 2049) to the hypervisor, and the VM boots from there while writes go to a temporary overlay on the appliance. Once the VM runs, click Migrate to production: the disks are moved to production storage with storage vMotion (VMware) or live disk move (Proxmox) without downtime.

- A KV-200 can run up to 4 instant VMs at the same time, a KV-600 up to 16.
- Performance of an instant VM is limited by the appliance; it is meant for hours, not weeks. Instant VMs that are not migrated within 7 days are flagged in the daily report.
- Instant restore of VMs with more than 16 virtual disks fails in 3.4.x (known issue KV-2288); use a full VM restore for those.

## 7 Database point-in-time restore

PostgreSQL and MySQL jobs combine a nightly full backup with transaction log backups every 15 minutes, which allows restoring to any second within the daily retention of the job (7 days with the default gfs-7-4-12 policy).

1. In the wizard, choose the database source and pick Point in time instead of a snapshot.
2. Enter the target time with its time zone, for example 2024-09-16 14:32:00+02:00.
3. Choose a target server. Restoring over the running production database is possible but requires the option --replace-database and stops the database service.
4. Keelvault restores the last full backup before that time, then replays the logs up to the exact time.

Command-line equivalent for PostgreSQL 16:

```
kvctl restore start --source db-prod-02 --pitr "2024-09-16 14:32:00+02:00" \
    --target db-restore01:/var/lib/postgresql/16/main
```

## 8 Bare-metal restore

1. Download kv-rescue-3.4.iso (1.2 GB) from Settings > Downloads, and write it to a USB stick or publish it for PXE boot.
2. Boot the server from it. The rescue system asks for the appliance address and an enrollment token.
3. Choose the snapshot. The rescue system recreates partitions, LVM volumes and file systems, restores the data and installs the boot loader.
4. Reboot. If the new hardware differs (other storage controller), enable Inject drivers for Windows servers.

## 9 Testing restores

A backup that has never been restored is only a hope. Keelvault 3.4 can test restores automatically: enable Restore testing on a job and Keelvault restores a random sample of files (default 100 files) every week into a sandbox on the appliance, compares checksums, and reports the result in the daily e-mail. In addition, restore one complete server per quarter to an isolated network and record the time it took; this measured time, not an estimate, is your recovery time objective.
"""

EN_SECURITY = r"""
# Security and Encryption

Keelvault 3.4 administrator guide, chapter 8. Backups hold a copy of everything a company owns, and attackers know it: modern ransomware tries to destroy backups before it encrypts production. This chapter describes how Keelvault protects backup data and how to configure the protection.

## 1 Encryption overview

- At rest: every chunk is encrypted with AES-256-GCM before it is written to any repository, with a unique 96-bit nonce per chunk. Encryption cannot be turned off for a repository once it exists.
- In transit: the web console, REST API, agent channels (7410, 7411) and replication (7420) use TLS 1.3 only by default. Agents authenticate with client certificates issued by the appliance's internal certificate authority, valid for 2 years.
- Chunk fingerprints used for deduplication are keyed HMAC-SHA256 values, so identical data in two different Keelvault installations produces different fingerprints.
- On CPUs without AES-NI, set encryption.cipher = "chacha20-poly1305"; this choice is made when the repository is created.

## 2 Key hierarchy

Keelvault uses envelope encryption with three levels of keys, shown in the figure.

[[img:key-hierarchy|Figure 8-1  Key hierarchy: key provider, KEK, DEK and chunks|14.5]]

1. Each repository has its own data-encryption key (DEK), a random 256-bit key that encrypts the chunks.
2. The DEK is stored only in wrapped (encrypted) form. It is wrapped by the key-encryption key (KEK).
3. The KEK is held by the key provider: the TPM 2.0 chip of a hardware appliance (the default), an external key manager, or a passphrase.
4. Independently, the DEK is also wrapped by the recovery key, 24 words (256 bits) shown once during setup. With the recovery key and the repository, data can be read on any new appliance.

With key_provider = "passphrase", the KEK is derived from the passphrase with Argon2id (64 MiB memory, 3 iterations, 4 lanes), and the passphrase must be entered after every restart of keelvaultd before jobs can run.

## 3 Key rotation

- The KEK is rotated automatically every 90 days (encryption.key_rotation_days). Rotation only re-wraps the DEKs and takes seconds; no data is re-encrypted.
- Rotate the KEK at once with kvctl encryption rotate-kek, for example when an administrator with access to the key manager leaves.
- A new DEK is created with kvctl repository rekey --repository default. New chunks use the new DEK; existing chunks keep the old DEK until garbage collection rewrites them. Full re-encryption of existing data is possible with --rewrite-all and runs at about 400 MB/s.
- A new recovery key can be generated at any time under Settings > Encryption > Recovery key; the previous one stops working immediately.

## 4 External key management

| Provider | Setting | Tested with | Notes |
| KMIP 1.4 | kmip | Thales CipherTrust Manager 2.14, Entrust KeyControl 10 | Client certificate authentication |
| AWS KMS | aws-kms | AWS KMS, symmetric keys | Needs kms:Encrypt, kms:Decrypt and kms:GenerateDataKey |
| HashiCorp Vault transit | vault-transit | Vault 1.15 and later | Since Keelvault 3.4.0; AppRole or TLS certificate auth |

If the key manager becomes unreachable, unwrapped DEKs stay cached in memory for 8 hours (encryption.key_cache_hours) so that backups continue. After that, jobs fail with KV-E4004 Encryption key unavailable until the key manager is reachable again. The cache is never written to disk; after a restart of keelvaultd the key manager must be reachable.

## 5 TLS certificates

A new appliance uses a self-signed certificate valid for 1 year. Replace it with a certificate from your own CA under Settings > Security > Certificate, or configure ACME (tls.acme_directory) for automatic renewal. The certificate must contain the appliance's DNS name as a subject alternative name. Allowed cipher suites with TLS 1.3 are TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256 and TLS_AES_128_GCM_SHA256. TLS 1.2 can be allowed with tls.min_tls_version = "1.2" for old monitoring tools; it then uses ECDHE suites with AES-GCM only.

## 6 Access control

- Roles: viewer (read only), operator (run jobs and restores), admin (everything) and security officer (manage keys, retention locks and audit log; cannot delete data).
- Multi-factor authentication with TOTP is mandatory for the admin and security officer roles; hardware keys (FIDO2/WebAuthn) are supported since 3.3.0.
- Local passwords need at least 14 characters. After 5 failed logins an account is locked for 15 minutes.
- Single sign-on through SAML 2.0 or OpenID Connect; keep at least one local admin account as a break-glass account and store its credentials offline.
- Dual authorization (four-eyes principle) is on by default for destructive actions: deleting a repository, deleting a job with its snapshots, or disabling encryption key rotation needs approval by a second admin within 24 hours.

## 7 Ransomware protection

- Retention locks make snapshots immutable for a number of days; nobody can shorten them, and they survive a factory reset. Use at least 14 days.
- On S3 targets, use Object Lock in compliance mode; even the bucket owner cannot delete locked objects.
- Keep SSH disabled (the default) and put the appliance's management interface in a separate network segment reachable only from administrators' jump hosts.
- Keep one copy offline: a weekly tape export or a replica appliance in a separate security domain (different admin accounts, different key provider).
- Alerts for suspicious activity are on by default: a sudden rise in the change rate of a source (more than 5 times its 30-day average), mass deletion requests, or repeated failed logins send an e-mail and a webhook.

## 8 Audit log and compliance

Every login, configuration change, restore and deletion is written to the audit log, which is kept for 365 days (logging.audit_retention_days, minimum 90) and is itself append-only. Forward it to a SIEM with syslog over TLS (RFC 5424, TCP port 6514). For environments that require validated cryptography, kvctl system fips enable switches the appliance to FIPS 140-3 mode, which uses the validated OpenSSL provider and disables chacha20-poly1305.
"""

# output file -> (builder, source text, metadata)
DOCX_DOCS = {
    (ZH, "02-memory-leak.docx"): (
        ZH_MEMORY_LEAK,
        {"title": "内存泄漏排查手册", "author": "基础架构组", "subject": "星澜交易平台运维手册", "lang": "zh-CN"},
    ),
    (ZH, "09-kafka-consumer-lag.docx"): (
        ZH_KAFKA_LAG,
        {"title": "Kafka 消息积压处理", "author": "消息中间件组", "subject": "星澜交易平台运维手册", "lang": "zh-CN"},
    ),
    (EN, "03-backup-schedules.docx"): (
        EN_BACKUP_SCHEDULES,
        {
            "title": "Backup Schedules and Retention Policies",
            "author": "Lanternfish Systems",
            "subject": "Keelvault 3.4 administrator guide",
            "lang": "en-US",
        },
    ),
    (EN, "10-storage-targets.docx"): (
        EN_STORAGE_TARGETS,
        {
            "title": "Storage Targets and Repositories",
            "author": "Lanternfish Systems",
            "subject": "Keelvault 3.4 administrator guide",
            "lang": "en-US",
        },
    ),
}
PDF_DOCS = {
    (ZH, "03-db-connection-pool.pdf"): (
        ZH_DB_POOL,
        {
            "title": "数据库连接池耗尽",
            "author": "DBA 组",
            "subject": "星澜交易平台运维手册",
            "lang": "zh-CN",
            "footer": "星澜交易平台运维手册　OPS-RB-003 数据库连接池耗尽",
        },
    ),
    (ZH, "10-incident-postmortem-20240318.pdf"): (
        ZH_POSTMORTEM,
        {
            "title": "故障复盘报告：2024-03-18 order-gateway 下单超时",
            "author": "交易系统研发部",
            "subject": "星澜交易平台故障复盘",
            "lang": "zh-CN",
            "footer": "星澜交易平台　故障复盘 PM-2024-007",
            "cjk_font": "ttf",
        },
    ),
    (EN, "04-restore-procedure.pdf"): (
        EN_RESTORE,
        {
            "title": "Restore Procedure",
            "author": "Lanternfish Systems",
            "subject": "Keelvault 3.4 administrator guide",
            "lang": "en-US",
            "footer": "Keelvault 3.4 Administrator Guide - Chapter 6: Restore Procedure",
        },
    ),
    (EN, "08-security-encryption.pdf"): (
        EN_SECURITY,
        {
            "title": "Security and Encryption",
            "author": "Lanternfish Systems",
            "subject": "Keelvault 3.4 administrator guide",
            "lang": "en-US",
            "footer": "Keelvault 3.4 Administrator Guide - Chapter 8: Security and Encryption",
        },
    ),
}

# Phrases that must come back out of each PDF's extracted text.
PDF_CHECKS = {
    "03-db-connection-pool.pdf": [
        "数据库连接池耗尽",
        "一、问题现象",
        "HikariPool-1",
        "maximumPoolSize",
        "# 2. 找出运行超过 10 秒的事务",
        "max_connections=2000",
    ],
    "10-incident-postmortem-20240318.pdf": [
        "故障复盘报告",
        "41,200 笔委托超时",
        "idx_account_date",
        "附录 A 相关数据",
        "gh-ost",
    ],
    "04-restore-procedure.pdf": [
        "Restore Procedure",
        "kv-rescue-3.4.iso",
        "--overwrite never|if-newer|always",
        "# Restore the nginx configuration",
        "port 2049",
    ],
    "08-security-encryption.pdf": ["AES-256-GCM", "Argon2id", "KV-E4004", "TCP port 6514"],
}


# ---------------------------------------------------------------------------------------
# Generate and verify
# ---------------------------------------------------------------------------------------


def generate() -> None:
    for (kb, name), fn in DISK_IMAGES.items():
        path = ROOT / kb / "images" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(png_bytes(fn()))
    for (kb, name), (src, meta) in DOCX_DOCS.items():
        build_docx(ROOT / kb / name, src, **meta)
    for (kb, name), (src, meta) in PDF_DOCS.items():
        build_pdf(ROOT / kb / name, src, **meta)


_CJK_RE = re.compile(r"[\u4e00-\u9fff]")
_REF_RE = re.compile(r"""(?:!\[[^\]]*\]\(|<img[^>]*\ssrc=")([^)"]+\.png)""")


def _squash(s: str) -> str:
    return re.sub(r"\s+", "", s)


def verify() -> bool:
    from docx import Document
    from pdfminer.high_level import extract_text

    ok = True
    rows = []

    def fail(msg):
        nonlocal ok
        ok = False
        print("FAIL:", msg)

    for kb_dir in sorted(p for p in ROOT.iterdir() if p.is_dir()):
        refs: set[str] = set()
        for path in sorted(kb_dir.rglob("*")):
            if not path.is_file():
                continue
            rel = path.relative_to(ROOT)
            ext = path.suffix.lower().lstrip(".")
            size = path.stat().st_size
            chars, images, note = "", "", ""
            if ext in ("md", "txt", "html"):
                text = path.read_text("utf-8")
                chars = len(text)
                found = _REF_RE.findall(text)
                refs.update(found)
                images = str(len(found)) if found else ""
                for ref in found:
                    if not (path.parent / ref).is_file():
                        fail(f"{rel}: referenced image {ref} missing")
            elif ext == "docx":
                doc = Document(str(path))
                text = "\n".join(p.text for p in doc.paragraphs)
                chars = len(text) + sum(len(c.text) for t in doc.tables for r in t.rows for c in r.cells)
                used = {p.style.name for p in doc.paragraphs}
                images = str(len(doc.inline_shapes)) if len(doc.inline_shapes) else ""
                note = (
                    ", ".join(
                        s for s in ["Heading 1", "Heading 2", "Heading 3", "List Number", "List Bullet"] if s in used
                    )
                    + f"; tables={len(doc.tables)}"
                )
                for s in ["Heading 1", "Heading 2", "List Number", "List Bullet"]:
                    if s not in used:
                        fail(f"{rel}: style {s} not used")
                if not doc.tables:
                    fail(f"{rel}: no table")
            elif ext == "pdf":
                text = extract_text(str(path))
                chars = len(text)
                pages = text.count("\f") or 1
                xobjects = path.read_bytes().count(b"/Subtype /Image")
                images = str(xobjects) if xobjects else ""
                raw = path.read_bytes()
                embedded = b"/FontFile2" in raw or b"/FontFile3" in raw
                note = f"pages={pages}; fonts {'embedded' if embedded else 'not embedded'}"
                if "(cid:" in text or "\ufffd" in text:
                    fail(f"{rel}: extracted text has undecodable glyphs")
                squashed = _squash(text)
                for phrase in PDF_CHECKS.get(path.name, []):
                    if _squash(phrase) not in squashed:
                        fail(f"{rel}: phrase not extracted: {phrase!r}")
                if kb_dir.name == ZH and len(_CJK_RE.findall(text)) < 500:
                    fail(f"{rel}: too little Chinese text extracted")
            elif ext == "png":
                with Image.open(path) as im:
                    im.verify()
                with Image.open(path) as im:
                    note = f"{im.size[0]}x{im.size[1]}"
                if size > MAX_PNG_BYTES:
                    fail(f"{rel}: {size} bytes > {MAX_PNG_BYTES}")
            rows.append((str(rel), ext, size, chars, images, note))
        for png in (kb_dir / "images").glob("*.png"):
            if f"images/{png.name}" not in refs:
                fail(f"{png.relative_to(ROOT)} is not referenced by any document")

    total = sum(r[2] for r in rows)
    w = max(len(r[0]) for r in rows)
    print(f"{'file':<{w}}  {'fmt':<5} {'bytes':>8} {'chars':>6} {'imgs':>4}  notes")
    for r in rows:
        print(f"{r[0]:<{w}}  {r[1]:<5} {r[2]:>8} {r[3]!s:>6} {r[4]:>4}  {r[5]}")
    print(f"total {len(rows)} files, {total} bytes ({total / 1024:.0f} KiB)")
    if total > 1.5 * 1024 * 1024:
        fail("data/kbs is larger than 1.5 MB")
    print("OK" if ok else "verification FAILED")
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--verify", action="store_true", help="only verify the files on disk")
    args = ap.parse_args(argv)
    if not args.verify:
        generate()
    return 0 if verify() else 1


if __name__ == "__main__":
    sys.exit(main())

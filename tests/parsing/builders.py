"""Real documents built in the tests: DOCX (python-docx), PDF (reportlab), PNG (Pillow)."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

LATIN_FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
CJK_FONT = Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc")


def font(size: int, cjk: bool = False) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    path = CJK_FONT if cjk else LATIN_FONT
    if path.exists():
        return ImageFont.truetype(str(path), size)
    return ImageFont.load_default(size=size)


def png(text: str = "", *, size: tuple[int, int] = (360, 120), color: str = "white", cjk: bool = False) -> bytes:
    """A PNG with ``text`` written large and black on ``color`` (readable by tesseract)."""
    im = Image.new("RGB", size, color)
    if text:
        ImageDraw.Draw(im).text((16, size[1] // 2 - 24), text, fill="black", font=font(40, cjk))
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


def make_docx(path: Path, pictures: list[bytes]) -> Path:
    """Title, headings, bullets, numbers, a table, an inline picture, a page break, a second picture."""
    import docx
    from docx.shared import Inches

    d = docx.Document()
    d.add_heading("Operations Guide", 0)
    d.add_heading("Install", 1)
    d.add_paragraph("Install the agent on every host.")
    d.add_paragraph("Download the package", style="List Bullet")
    d.add_paragraph("Run the installer", style="List Number")
    d.add_heading("Ports", 2)
    table = d.add_table(rows=2, cols=2)
    for (r, c), value in {(0, 0): "Port", (0, 1): "Use", (1, 0): "8443", (1, 1): "console"}.items():
        table.cell(r, c).text = value
    p = d.add_paragraph("The topology: ")
    p.add_run().add_picture(io.BytesIO(pictures[0]), width=Inches(2))
    p.add_run(" shows the agents.")
    d.add_page_break()
    d.add_heading("恢复", 1)
    d.add_paragraph("恢复步骤见下图。")
    d.add_picture(io.BytesIO(pictures[1]), width=Inches(2))
    d.save(str(path))
    return path


def make_pdf(path: Path, picture: bytes) -> Path:
    """Two pages: English headings, a list and an image on page 1; Chinese (STSong-Light) on page 2."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
    from reportlab.pdfgen import canvas

    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    c = canvas.Canvas(str(path), pagesize=A4)
    c.setFont("Helvetica-Bold", 20)
    c.drawString(72, 780, "Restore Guide")
    c.setFont("Helvetica", 11)
    c.drawString(72, 750, "Restores start from a snapshot and")
    c.drawString(72, 737, "finish with a verification step.")
    c.setFont("Helvetica-Bold", 15)
    c.drawString(72, 700, "Before you start")
    c.setFont("Helvetica", 11)
    c.drawString(72, 680, "- Check free space")
    c.drawString(72, 664, "- Pick a snapshot")
    c.drawImage(ImageReader(io.BytesIO(picture)), 72, 500, width=240, height=80)
    c.drawString(72, 480, "The wizard is shown above.")
    c.drawString(290, 30, "1")
    c.showPage()
    c.setFont("STSong-Light", 16)
    c.drawString(72, 780, "第二章 数据恢复")
    c.setFont("STSong-Light", 11)
    c.drawString(72, 750, "恢复前先确认快照完整。")
    c.drawString(290, 30, "2")
    c.showPage()
    c.save()
    return path


def make_encrypted_pdf(path: Path) -> Path:
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), encrypt="secret")
    c.drawString(72, 700, "classified")
    c.save()
    return path

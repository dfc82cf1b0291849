"""`dslc report`: a run's metrics file as one self-contained HTML page (page.py)."""

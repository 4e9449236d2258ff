"""Reports: a run's or a sweep's results on one self-contained HTML page (folder.py: which it is;
run.py: a run's page; page.py: the page's frame; plots.py: its SVG plots)."""

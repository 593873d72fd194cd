"""`eventdedup report`: what the pipeline did over a range of commits, for people (a self-contained
HTML page with charts) and for machines (the same figures as JSON). docs/report.md says how each
figure is computed and what a report reads.

- `collect`: what the store holds for the range, read by range and column, never whole;
- `figures`: every figure, computed from that alone (pure);
- `page` and `charts`: the HTML and its inline SVG;
- `build` (`build_report` / `publish_report`): the command's and the maintenance DAG's entry points.
"""

"""The dashboard's pages, one module per part: the dashboard with its lists, exports and a reader's page of each item
(`dashboard`), the comparison of two slices (`compare`), and the corrections' panel, lists and exports
(`corrections`)."""

"""The stakeholders' figures: counters booked with every review write (rollups), the dashboard built from them,
agreement with people, labels from outside, the audit sample and exports."""

"""`modelship tune`: the artifact and the serving config of one model chosen by measurement, under a latency budget
and a throughput floor.

space (what may change), measurement (what to measure and what one point gave), constraints (the budget and the
floor, and the one judge of a point against them), concurrency (the best client concurrency of one candidate),
search (the hill climb and the brute-force reference, ask/tell, and the driver that runs either against a measurer)
are pure; live measures on a Triton server, local reaches it (or starts one), restore puts back every config it
changed, apply writes the winner into the repository and loads it, report renders the table and the plot.
"""

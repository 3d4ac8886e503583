"""`modelship tune`: the artifact and the serving config of one model chosen by measurement, under a latency budget.

space (what may change), measurement (what one point gave, and the budget), concurrency (the best client
concurrency of one candidate), search (the hill climb and the brute-force reference) are pure; live measures on a
Triton server, restore puts back every config it changed, report renders the table and the plot.
"""

"""Infrastructure under every store: the one database and its transactions, prepared statements, fresh ids, the
background sweep loop. Nothing here knows what an approval is.
"""

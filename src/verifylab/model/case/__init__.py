"""The case study's account: its reported cycle, its box per communication regime, the options priced on it (fusion,
a faster collective, fewer ranks, elimination), the reconciliation of its figures and the hypotheses for its jump."""

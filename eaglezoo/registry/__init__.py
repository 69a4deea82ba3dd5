"""The zoo's records: registry/*.yaml loaded and checked, kept true against the Hub, planned and recorded by CI."""

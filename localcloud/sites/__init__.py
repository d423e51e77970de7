"""More than one cluster: federations of local clouds and an on-prem site that bursts into them."""

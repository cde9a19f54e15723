"""Training data: feature extraction, alignment ingestion (pdf-id targets), the streaming
chunk dataset."""

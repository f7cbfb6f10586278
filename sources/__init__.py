"""dlt sources of repo-analytics (the extractor). Empty until the extraction-core issue."""

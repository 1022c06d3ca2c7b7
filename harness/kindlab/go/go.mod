module powercut.local/kindimages

go 1.26.0
